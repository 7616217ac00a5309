#!/usr/bin/env python3
"""bench/torch_loader_ref.py — PyTorch DataLoader side of bench/loader.sh (no training).

Measures how many augmented, normalized samples per second a torch.utils.data.DataLoader
delivers from one split of an HDF5 file in gpurun's layout (GROUP/images uint8 [N,C,H,W],
GROUP/labels [N]), doing the work bench/loader_bench.c gives gr_loader:
  shuffled, drop_last, --workers worker processes (persistent; each opens its own h5py file
  handle on first use), per sample one h5py read, then
    --crop rrc224  RandomResizedCrop(224) (torchvision's scale and ratio) + RandomHorizontalFlip
    --crop pad4    RandomCrop(28, padding=4) + RandomHorizontalFlip
    --crop none    nothing,
  then ConvertImageDtype(float32) and Normalize([0.45], [0.225]); the default collate.
One batch warms up (workers started, files opened), then --batches batches are timed.
Prints one JSON line:
  {"samples_per_s": ..., "gb_per_s": ..., "workers": ..., "batches": ..., "crop": ...}
gb_per_s counts one byte per delivered pixel (the uint8 pixels of the cropped images), as
loader_bench.c does.

Usage: bench/torch_loader_ref.py FILE.h5 [--group /train] [--batch 256] [--workers 2]
           [--crop rrc224|pad4|none] [--batches 60] [--threads 2]
"""
import argparse
import json
import time

import h5py
import numpy as np
import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader, Dataset


class H5Split(Dataset):
    """one sample per __getitem__, read with h5py from a handle opened in the process that uses it"""

    def __init__(self, path, group, transform):
        self.path, self.group, self.transform = path, group, transform
        self.file = self.images = self.labels = None
        with h5py.File(path, "r") as f:  # closed again before the workers fork
            self.n = len(f[group]["labels"])

    def __len__(self):
        return self.n

    def _open(self):
        self.file = h5py.File(self.path, "r")
        g = self.file[self.group]
        self.images, self.labels = g["images"], g["labels"]

    def __getitem__(self, i):
        if self.file is None:
            self._open()
        x = torch.from_numpy(np.ascontiguousarray(self.images[i]))
        if x.dim() == 2:  # [H,W] images: one channel
            x = x.unsqueeze(0)
        return self.transform(x), int(self.labels[i])


def transform(crop):
    steps = []
    if crop == "rrc224":
        steps += [T.RandomResizedCrop(224, antialias=False), T.RandomHorizontalFlip()]
    elif crop == "pad4":
        steps += [T.RandomCrop(28, padding=4), T.RandomHorizontalFlip()]
    steps += [T.ConvertImageDtype(torch.float32), T.Normalize([0.45], [0.225])]
    return T.Compose(steps)


def main():
    ap = argparse.ArgumentParser(description="PyTorch DataLoader throughput on an HDF5 split "
                                 "(one JSON line on stdout)")
    ap.add_argument("file")
    ap.add_argument("--group", default="/train")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--crop", choices=["rrc224", "pad4", "none"], default="rrc224")
    ap.add_argument("--batches", type=int, default=60, help="timed batches after one warm-up batch")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads of the main process")
    a = ap.parse_args()
    if a.batch < 1 or a.batches < 1 or a.workers < 0 or a.threads < 1:
        ap.error("--batch, --batches and --threads must be >= 1, --workers >= 0")
    torch.set_num_threads(a.threads)

    ds = H5Split(a.file, a.group, transform(a.crop))
    if len(ds) // a.batch < a.batches + 1:
        ap.error(f"{a.file}{a.group}: {len(ds)} samples make fewer than {a.batches + 1} batches of {a.batch}")
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True, num_workers=a.workers,
                    pin_memory=False, persistent_workers=a.workers > 0)
    it = iter(dl)
    next(it)  # warm-up
    n = pixels = 0
    t0 = time.perf_counter()
    for _ in range(a.batches):
        x, _ = next(it)
        n += x.shape[0]
        pixels += x.numel()
    dt = time.perf_counter() - t0
    print(json.dumps({"samples_per_s": n / dt, "gb_per_s": pixels / dt / 1e9, "workers": a.workers,
                      "batches": a.batches, "crop": a.crop}), flush=True)


if __name__ == "__main__":
    main()
