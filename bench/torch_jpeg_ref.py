#!/usr/bin/env python3
"""bench/torch_jpeg_ref.py — PyTorch DataLoader side of bench/jpeg.sh (no training).

How many training images per second a torch.utils.data.DataLoader delivers from an
imagefolder tree of JPEG files (DIR/<class>/*.jpg), each read from its file (the page cache
when the files were read before) per sample, with the usual ImageNet training transforms:
  --decoder pil    torchvision.datasets.ImageFolder as it is (its default loader: PIL
                   Image.open + convert("RGB"), which decodes the whole image), then
                   RandomResizedCrop(224) (on a PIL image: PIL's bilinear resize),
                   RandomHorizontalFlip, ToTensor, Normalize(ImageNet mean, std);
  --decoder tvio   the same tree through torchvision.datasets.DatasetFolder with
                   torchvision.io.read_file + torchvision.io.decode_jpeg (libjpeg, whole image,
                   to a uint8 tensor), then RandomResizedCrop(224, antialias=False) (tensor
                   bilinear; gr_loader's convention), RandomHorizontalFlip,
                   ConvertImageDtype(float32), Normalize(ImageNet mean, std).
Shuffled, drop_last, --workers persistent worker processes (each torch.set_num_threads(1), as
DataLoader sets it), the default collate, no pinned memory. The stream crosses epochs as a
training loop does. Each worker makes whole batches, so the first W batches (W workers, at
least 1) come at about the same time: they warm up (workers started), then --batches, rounded
down to a multiple of W, are timed (default: one epoch less the warm-up, so rounded), as
bench/jpeg_bench.c does.
Prints one JSON line: {"images_per_s": ..., "workers": ..., "batch": ..., "batches": ...,
"images": ..., "decoder": ...}

Usage: bench/torch_jpeg_ref.py DIR [--decoder pil|tvio] [--batch 128] [--workers 2]
           [--batches N] [--size 224]
"""
import argparse
import json
import time

import torch
import torchvision
import torchvision.transforms as T
from torch.utils.data import DataLoader

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def tvio_loader(path):
    """the file's bytes, decoded whole to a uint8 [3, H, W] tensor by torchvision.io"""
    return torchvision.io.decode_jpeg(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)


def dataset(root, decoder, size):
    if decoder == "pil":
        tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
        return torchvision.datasets.ImageFolder(root, transform=tf)
    tf = T.Compose([T.RandomResizedCrop(size, antialias=False), T.RandomHorizontalFlip(),
                    T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)])
    return torchvision.datasets.DatasetFolder(root, loader=tvio_loader, extensions=(".jpg", ".jpeg"), transform=tf)


def endless(dl):
    while True:
        yield from dl


def main():
    ap = argparse.ArgumentParser(description="PyTorch DataLoader JPEG training-pipeline throughput "
                                 "(one JSON line on stdout)")
    ap.add_argument("dir")
    ap.add_argument("--decoder", choices=["pil", "tvio"], default="pil")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batches", type=int, default=0, help="timed batches after one warm-up batch "
                    "(0: one epoch less the warm-up batch)")
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args()
    if a.batch < 1 or a.workers < 0 or a.batches < 0 or a.size < 1:
        ap.error("--batch and --size must be >= 1, --workers and --batches >= 0")

    ds = dataset(a.dir, a.decoder, a.size)
    warm = max(1, a.workers)
    batches = a.batches or len(ds) // a.batch - warm
    batches -= batches % warm
    if batches < 1:
        ap.error(f"{a.dir}: {len(ds)} images make too few batches of {a.batch} to warm up {warm} and time {warm}")
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True, num_workers=a.workers,
                    pin_memory=False, persistent_workers=a.workers > 0)
    it = endless(dl)
    for _ in range(warm):
        next(it)
    n = 0
    sink = 0.0
    t0 = time.perf_counter()
    for i in range(batches):
        x, _ = next(it)
        n += x.shape[0]
        sink += float(x.view(-1)[(i * 7919) % x.numel()])  # touch the batch, as a consumer would
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_s": n / dt, "workers": a.workers, "batch": a.batch, "batches": batches,
                      "images": n, "decoder": a.decoder, "check": sink}), flush=True)


if __name__ == "__main__":
    main()
