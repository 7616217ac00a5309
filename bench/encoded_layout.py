#!/usr/bin/python3
"""encoded_layout.py — why an encoded split is one contiguous byte dataset
plus offsets (DESIGN 1.5) and not an HDF5 vlen dataset: both layouts of the
same JPEG files, their size on disk against the JPEG bytes, and the time to
read every sample once in a shuffled order (what a loader epoch does),
through h5py for both, and by pread at the dataset's file offset as
gpurun's reader does for the contiguous one. Pages cached (each file read
once first); median of REPEAT passes.

    /usr/bin/python3 bench/encoded_layout.py data/jpeg-photos-3000.list [REPEAT]

The list is bench/jpeg.sh's (one JPEG path per line, made by it)."""
import os
import random
import statistics
import sys
import tempfile
import time

import h5py
import numpy as np


def timed(fn, repeat):
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with open(sys.argv[1]) as f:
        paths = [line.strip() for line in f if line.strip()]
    blobs = [open(p, "rb").read() for p in paths]
    n, total = len(blobs), sum(len(b) for b in blobs)
    order = list(range(n))
    random.Random(0).shuffle(order)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(sys.argv[1]))) as d:
        vlen, cont = os.path.join(d, "vlen.h5"), os.path.join(d, "contiguous.h5")
        with h5py.File(vlen, "w") as f:
            ds = f.create_dataset("encoded", (n,), dtype=h5py.vlen_dtype(np.uint8))
            for i, b in enumerate(blobs):
                ds[i] = np.frombuffer(b, np.uint8)
        offsets = np.zeros(n + 1, np.uint64)
        offsets[1:] = np.cumsum([len(b) for b in blobs])
        with h5py.File(cont, "w") as f:
            f.create_dataset("encoded", data=np.frombuffer(b"".join(blobs), np.uint8))
            f.create_dataset("offsets", data=offsets)
        for p in (vlen, cont):
            open(p, "rb").read()  # into the page cache
        fv, fc = h5py.File(vlen, "r"), h5py.File(cont, "r")
        dv, dc = fv["encoded"], fc["encoded"]
        base = dc.id.get_offset()
        fd = os.open(cont, os.O_RDONLY)

        def read_vlen():
            for i in order:
                dv[i]

        def read_cont():
            for i in order:
                dc[int(offsets[i]):int(offsets[i + 1])]

        def read_pread():
            for i in order:
                os.pread(fd, int(offsets[i + 1] - offsets[i]), base + int(offsets[i]))

        tv, tc, tp = timed(read_vlen, repeat), timed(read_cont, repeat), timed(read_pread, repeat)
        sv, sc = os.path.getsize(vlen), os.path.getsize(cont)
        os.close(fd)
        fv.close()
        fc.close()
    print(f"{n} JPEGs, {total:,} bytes ({total / n / 1024:.1f} KB each); h5py {h5py.version.version}, "
          f"HDF5 {h5py.version.hdf5_version}")
    print(f"{'layout':44s} {'bytes':>14s} {'x JPEGs':>8s} {'read all, s':>12s} {'samples/s':>10s}")
    print(f"{'vlen uint8 (h5py)':44s} {sv:14,d} {sv / total:8.4f} {tv:12.3f} {n / tv:10,.0f}")
    print(f"{'contiguous + offsets (h5py slice)':44s} {sc:14,d} {sc / total:8.4f} {tc:12.3f} {n / tc:10,.0f}")
    print(f"{'contiguous + offsets (pread, as gpurun)':44s} {sc:14,d} {sc / total:8.4f} {tp:12.3f} {n / tp:10,.0f}")


main()
