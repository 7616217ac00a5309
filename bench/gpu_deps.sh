#!/usr/bin/env bash
# bench/gpu_deps.sh — run on a Debian 12 machine (with network) before a GPU session:
# packs gpurun's C dependencies as unpacked Debian packages, for a GPU machine that has
# a compiler, CMake and CUDA but no -dev packages and no network.
#
#   bench/gpu_deps.sh          -> bench/deps/root.tar.xz  (+ bench/deps/MANIFEST.txt)
#
# The archive unpacks (bench/gpu.sh does it) into bench/deps/root: usr/include and
# usr/lib/x86_64-linux-gnu of libyaml, HDF5 (serial), OpenBLAS (pthread), oneDNN,
# libpng, libjpeg62-turbo and zlib, plus every shared library they need that is not
# part of glibc (found from the ELF NEEDED entries, so the hdf5 -> libcurl -> TLS/
# Kerberos tree comes along). libstdc++, libgcc_s, libgomp and gcc's omp.h go to
# root/fallback/ instead: every gcc install has its own, and a newer system copy must
# win; gpu.sh puts fallback/lib on LD_LIBRARY_PATH only when the system lacks them.
# Carry only the archive to the GPU machine: the unpacked tree is larger than the
# 64 MiB a session may carry (oneDNN and OpenBLAS are ~37 MiB each).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=bench/deps
ARCH=x86_64-linux-gnu

SEEDS=(libyaml-0-2 libyaml-dev libhdf5-103-1 libhdf5-dev libopenblas0-pthread libopenblas-pthread-dev
       libdnnl2 libdnnl-dev libpng16-16 libpng-dev libjpeg62-turbo libjpeg62-turbo-dev zlib1g zlib1g-dev)
FALLBACK=(libstdc++6 libgcc-s1 libgomp1 libgcc-12-dev)
# glibc's own libraries and the compiler runtimes above: never taken from the prefix
BASE_SONAMES=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 libutil.so.1
 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1 libgomp.so.1 "

t0=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root" "$work/fb" "$DEPS"
# apt drops to user _apt for downloads; let it write here (else a warning per package)
id _apt >/dev/null 2>&1 && chown _apt "$work/debs"

if ! apt-cache show libdnnl2 >/dev/null 2>&1; then
    echo "apt lists lack libdnnl2: running apt-get update"
    apt-get update -q
fi

declare -A fetched=()
fetch() { # fetch PKG... into DIR ($1): download once, unpack with dpkg -x
    local dir=$1; shift
    local p
    for p in "$@"; do
        [ -n "${fetched[$p]:-}" ] && continue
        fetched[$p]=1
        (cd "$work/debs" && apt-get download -q "$p" >/dev/null 2>&1) || { echo "apt-get download $p failed" >&2; exit 1; }
        dpkg -x "$(ls "$work/debs/${p}"_*.deb | head -n 1)" "$dir"
    done
}

echo "downloading: ${SEEDS[*]}"
fetch "$work/root" "${SEEDS[@]}"
fetch "$work/fb" "${FALLBACK[@]}"

# Debian 12 still ships some libraries (zlib, libgcc) under /lib: merge into /usr/lib so one
# directory serves as -L and RPATH.
merge_lib() {
    local r=$1
    if [ -d "$r/lib" ]; then
        mkdir -p "$r/usr/lib"
        cp -a "$r/lib/." "$r/usr/lib/"
        rm -rf "${r:?}/lib"
    fi
}
merge_lib "$work/root"

# Follows NEEDED entries to a fixed point; each missing soname is mapped to its package
# through this machine's dpkg database (the packages gpurun links here are installed).
lib_dirs() { find "$work/root/usr/lib/$ARCH" -type d; }
have_soname() { local d; for d in $(lib_dirs); do [ -e "$d/$1" ] && return 0; done; return 1; }
while :; do
    missing=()
    while IFS= read -r so; do
        case "$BASE_SONAMES" in *" $so "*) continue ;; esac
        have_soname "$so" || missing+=("$so")
    done < <(find "$work/root/usr/lib" -type f -name '*.so*' -exec readelf -d {} + 2>/dev/null |
             sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
    [ ${#missing[@]} -eq 0 ] && break
    pkgs=()
    for so in "${missing[@]}"; do
        p=$(dpkg -S "*/$so" 2>/dev/null | awk -F': ' -v so="$so" '{n=split($2, a, "/"); if (a[n] == so) print $1}' |
            head -n 1 | sed 's/, .*//; s/:amd64$//')
        [ -n "$p" ] || { echo "no installed package provides $so (install it here, then rerun)" >&2; exit 1; }
        [ -n "${fetched[$p]:-}" ] && { echo "$p was unpacked but $so is still missing" >&2; exit 1; }
        pkgs+=("$p")
    done
    echo "needed by those: ${pkgs[*]}"
    fetch "$work/root" "${pkgs[@]}"
    merge_lib "$work/root"
done

# what gpurun does not use: docs, man pages, static archives, tools, CMake/Fortran files,
# HDF5's C++/Fortran/HL link names (their libraries are not packed), OpenBLAS's BLAS/LAPACK
# alternatives (gpurun links libopenblas itself)
r=$work/root
rm -rf "${r:?}/usr/share" "${r:?}/usr/bin" "${r:?}/usr/sbin" "${r:?}/etc" "${r:?}/usr/lib/$ARCH/cmake" \
       "${r:?}/usr/lib/$ARCH/openblas-pthread/cmake" "${r:?}/usr/lib/$ARCH/"*/plugins "${r:?}/usr/libexec"
find "$r" \( -name '*.a' -o -name '*.mod' -o -name '*.settings' -o -name '*.la' \) -delete
rm -f "$r/usr/lib/$ARCH/openblas-pthread/"{libblas,liblapack}.so*
# Absolute links (zlib's libz.so -> /lib/...) would point into the GPU machine's own /usr.
find "$r" -type l | while IFS= read -r l; do
    t=$(readlink "$l")
    case "$t" in
    /lib/* | /usr/lib/* | /usr/include/*)
        t=${t#/usr}
        ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$r/usr$t")" "$l" ;;
    /*) rm -f "$l" ;; # /etc/alternatives and the like: not part of the tree
    esac
done
find "$r" -xtype l -delete # dangling after the pruning above
find "$r" -type d -empty -delete

# fallback: the compiler runtimes and omp.h only
merge_lib "$work/fb"
mkdir -p "$r/fallback/lib" "$r/fallback/include"
cp -a "$work/fb/usr/lib/$ARCH/"{libstdc++.so.6*,libgcc_s.so.1,libgomp.so.1*} "$r/fallback/lib/"
ln -sfn libgomp.so.1 "$r/fallback/lib/libgomp.so"
cp "$(find "$work/fb/usr/lib/gcc" -name omp.h | head -n 1)" "$r/fallback/include/"
rm -f "$r/fallback/lib/"*.py

# the newest glibc / libstdc++ symbol versions the packed libraries ask for: gpu.sh compares
# them with the GPU machine's
need_glibc=$(find "$r/usr/lib" -type f -name '*.so*' -exec objdump -T {} + 2>/dev/null |
             grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n 1)
need_cxx=$(find "$r/usr/lib" -type f -name '*.so*' -exec objdump -T {} + 2>/dev/null |
           grep -oE 'GLIBCXX_[0-9.]+' | sort -uV | tail -n 1)
{
    echo "# bench/deps/root.tar.xz, made by bench/gpu_deps.sh on $(date -u +%Y-%m-%dT%H:%MZ) ($(. /etc/os-release; echo "$PRETTY_NAME"))"
    echo "needs_glibc ${need_glibc#GLIBC_}"
    echo "needs_glibcxx ${need_cxx#GLIBCXX_}"
    for p in $(printf '%s\n' "${!fetched[@]}" | sort); do
        echo "package $p $(dpkg-deb -f "$(ls "$work/debs/${p}"_*.deb | head -n 1)" Version)"
    done
} >"$work/MANIFEST.txt"
cp "$work/MANIFEST.txt" "$r/MANIFEST.txt"

# an unpacked tree from an older archive is stale: gpu.sh unpacks this one on first use
rm -rf "${DEPS:?}/root" "$DEPS/root.tar.xz"
tar -C "$r" -cf - . | xz -9 -T0 >"$DEPS/root.tar.xz"
cp "$work/MANIFEST.txt" "$DEPS/MANIFEST.txt"
echo "unpacked: $(du -sh "$r" | cut -f1) in $(find "$r" -type f | wc -l) files; needs glibc >= ${need_glibc#GLIBC_}, libstdc++ ${need_cxx}"
echo "packages: $(printf '%s\n' "${!fetched[@]}" | sort | tr '\n' ' ')"
echo "archive:  $DEPS/root.tar.xz $(du -h "$DEPS/root.tar.xz" | cut -f1) ($(stat -c %s "$DEPS/root.tar.xz") bytes)"
echo "bench/deps total: $(du -sh "$DEPS" | cut -f1) ($((SECONDS - t0)) s). Carry bench/deps/root.tar.xz (not the unpacked root/)."
