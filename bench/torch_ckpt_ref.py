#!/usr/bin/env python3
"""bench/torch_ckpt_ref.py — torch.save / torch.load side of bench/ckpt.sh.

Measures how fast PyTorch writes and reads the training state of a ResNet-50 (the model of
configs/resnet50.yaml: torchvision's resnet50(), 25,557,032 parameters, plus the BN running
statistics, plus SGD's momentum buffer for every parameter: about 205 MB of float32), the
state bench/ckpt_bench.c saves with gr_ckpt_save. The momentum buffers are filled with random
floats (no training step is needed for that). Each of --repeats rounds:
  save  torch.save({"model", "optim", "step"}) into DIR/torch_ckpt.pt, flush and fsync
        (so the data is on the disk when the clock stops, as gpurun's save);
  load  torch.load of the file just written (it is in the page cache, as on gpurun's side).
The medians are printed as one JSON line:
  {"bytes": ..., "save_s": ..., "load_s": ..., "save_gb_per_s": ..., "load_gb_per_s": ..., "repeats": ...}
bytes is the size of torch's file; the file is removed at the end.

Usage: bench/torch_ckpt_ref.py DIR [--repeats R (3)] [--threads T (all cores)]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torchvision


def training_state():
    """the model's state_dict and SGD's state_dict with a momentum buffer per parameter"""
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    # configs/resnet50.yaml's optimizer; the hyperparameters do not change the state's size
    opt = torch.optim.SGD(model.parameters(), lr=0.256, momentum=0.875, weight_decay=3.05e-5)
    with torch.no_grad():
        for p in model.parameters():
            opt.state[p]["momentum_buffer"] = torch.randn_like(p)
    return {"model": model.state_dict(), "optim": opt.state_dict(), "step": 1}


def save(state, path):
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def load(path):
    t0 = time.perf_counter()
    state = torch.load(path, map_location="cpu")
    dt = time.perf_counter() - t0
    del state
    return dt


def main():
    ap = argparse.ArgumentParser(description="torch.save / torch.load of a ResNet-50 training state "
                                 "(one JSON line on stdout)")
    ap.add_argument("dir", help="where the checkpoint file is written (the same filesystem as gpurun's)")
    ap.add_argument("--repeats", type=int, default=3, help="save+load rounds; the medians are printed (default 3)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads (default: all cores)")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    torch.set_num_threads(a.threads)
    os.makedirs(a.dir, exist_ok=True)
    state = training_state()
    path = os.path.join(a.dir, "torch_ckpt.pt")
    saves, loads = [], []
    try:
        for _ in range(a.repeats):
            saves.append(save(state, path))
            loads.append(load(path))
        size = os.path.getsize(path)
    finally:
        if os.path.exists(path):
            os.remove(path)
    s, l = statistics.median(saves), statistics.median(loads)
    print(json.dumps({"bytes": size, "save_s": s, "load_s": l, "save_gb_per_s": size / s / 1e9,
                      "load_gb_per_s": size / l / 1e9, "repeats": a.repeats}), flush=True)


if __name__ == "__main__":
    main()
