# cmake/gpurun_deps_prefix.cmake — gpurun's C dependencies from GPURUN_DEPS_PREFIX, a tree
# of unpacked Debian 12 packages (bench/gpu_deps.sh makes one): <prefix>/usr/include and
# <prefix>/usr/lib/<triplet>, for a machine that has a compiler but no -dev packages.
#
# Defines what the pkg-config path of CMakeLists.txt defines: PkgConfig::YAML, ::HDF5,
# ::OPENBLAS, ::PNG, ::JPEG, ZLIB::ZLIB, OpenMP::OpenMP_C, DNNL_INCLUDE_DIR, DNNL_LIBRARY.
# pkg-config is not used: the prefix's .pc files say prefix=/usr, and the GPU machine may
# not have pkg-config at all. Every header and library is looked up in the prefix only
# (NO_DEFAULT_PATH), so a stray system copy of one library cannot mix with the others.
#
# Run time: the binaries get the prefix's library directories as DT_RPATH, not RUNPATH.
# RUNPATH would serve only the executable's direct needs; DT_RPATH also serves the
# libraries' own (libhdf5 -> libcurl -> libssl ...), which exist only in the prefix there.

set(GPURUN_DEPS_TRIPLET x86_64-linux-gnu CACHE STRING "Multiarch directory of the libraries under GPURUN_DEPS_PREFIX")
get_filename_component(_gr_root "${GPURUN_DEPS_PREFIX}" ABSOLUTE)
set(_gr_inc ${_gr_root}/usr/include)
set(_gr_lib ${_gr_root}/usr/lib/${GPURUN_DEPS_TRIPLET})
if(NOT IS_DIRECTORY ${_gr_lib} OR NOT IS_DIRECTORY ${_gr_inc})
  message(FATAL_ERROR "GPURUN_DEPS_PREFIX=${GPURUN_DEPS_PREFIX}: no usr/include and usr/lib/${GPURUN_DEPS_TRIPLET} "
                      "there (make it with bench/gpu_deps.sh; bench/gpu.sh unpacks it)")
endif()
message(STATUS "gpurun: dependencies from ${_gr_root}")

# One library: its header directory and library file, as an imported target (imported
# include directories are -isystem, so -Werror does not judge the packages' headers).
function(_gr_prefix_dep target header)
  cmake_parse_arguments(A "" "" "INCLUDE_SUFFIXES;NAMES;LIB_SUFFIXES" ${ARGN})
  find_path(GPURUN_DEP_${target}_INCLUDE_DIR ${header} PATHS ${_gr_inc} ${_gr_inc}/${GPURUN_DEPS_TRIPLET}
            PATH_SUFFIXES ${A_INCLUDE_SUFFIXES} NO_DEFAULT_PATH REQUIRED)
  find_library(GPURUN_DEP_${target}_LIBRARY NAMES ${A_NAMES} NAMES_PER_DIR PATHS ${_gr_lib}
               PATH_SUFFIXES ${A_LIB_SUFFIXES} NO_DEFAULT_PATH REQUIRED)
  add_library(${target} INTERFACE IMPORTED)
  # the multiarch include directory holds jconfig.h, which jpeglib.h includes
  set_target_properties(${target} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${GPURUN_DEP_${target}_INCLUDE_DIR};${_gr_inc}/${GPURUN_DEPS_TRIPLET}"
    INTERFACE_LINK_LIBRARIES "${GPURUN_DEP_${target}_LIBRARY}")
endfunction()

_gr_prefix_dep(PkgConfig::YAML yaml.h NAMES yaml)
_gr_prefix_dep(PkgConfig::HDF5 hdf5.h INCLUDE_SUFFIXES hdf5/serial NAMES hdf5 hdf5_serial LIB_SUFFIXES hdf5/serial)
_gr_prefix_dep(PkgConfig::OPENBLAS cblas.h INCLUDE_SUFFIXES openblas-pthread NAMES openblas LIB_SUFFIXES openblas-pthread)
_gr_prefix_dep(PkgConfig::PNG png.h INCLUDE_SUFFIXES libpng16 NAMES png16 png)
_gr_prefix_dep(PkgConfig::JPEG jpeglib.h NAMES jpeg)
_gr_prefix_dep(GpurunDeps::dnnl oneapi/dnnl/dnnl.h NAMES dnnl)
# CMakeLists.txt adds DNNL_INCLUDE_DIR as a plain -I and links DNNL_LIBRARY: hand it the
# imported target instead, whose headers stay -isystem (a plain -I of <prefix>/usr/include
# would put every package header there under -Werror).
set(DNNL_INCLUDE_DIR "")
set(DNNL_LIBRARY GpurunDeps::dnnl)

find_path(ZLIB_INCLUDE_DIR zlib.h PATHS ${_gr_inc} NO_DEFAULT_PATH REQUIRED)
find_library(ZLIB_LIBRARY NAMES z PATHS ${_gr_lib} NO_DEFAULT_PATH REQUIRED)
find_package(ZLIB REQUIRED)

set(_gr_rpath ${_gr_lib} ${_gr_lib}/openblas-pthread)

# OpenMP comes with the compiler (gcc's libgomp); a compiler without it gets the prefix's
# fallback copy (gcc 12's omp.h and libgomp.so.1).
find_package(OpenMP COMPONENTS C)
if(NOT OpenMP_C_FOUND)
  set(_gr_fb ${_gr_root}/fallback)
  find_path(GPURUN_DEP_OMP_INCLUDE_DIR omp.h PATHS ${_gr_fb}/include NO_DEFAULT_PATH REQUIRED)
  find_library(GPURUN_DEP_GOMP_LIBRARY NAMES gomp libgomp.so.1 NAMES_PER_DIR PATHS ${_gr_fb}/lib NO_DEFAULT_PATH REQUIRED)
  message(STATUS "gpurun: the compiler has no OpenMP of its own: libgomp from ${_gr_fb}")
  if(NOT TARGET OpenMP::OpenMP_C)
    add_library(OpenMP::OpenMP_C INTERFACE IMPORTED)
  endif()
  set_target_properties(OpenMP::OpenMP_C PROPERTIES
    INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:C>:-fopenmp>"
    INTERFACE_INCLUDE_DIRECTORIES "${GPURUN_DEP_OMP_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${GPURUN_DEP_GOMP_LIBRARY};Threads::Threads")
  list(APPEND _gr_rpath ${_gr_fb}/lib)
endif()

list(APPEND CMAKE_BUILD_RPATH ${_gr_rpath})
list(JOIN _gr_rpath ":" _gr_rpath_link)
add_link_options(LINKER:--disable-new-dtags "LINKER:-rpath-link,${_gr_rpath_link}")
