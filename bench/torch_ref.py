#!/usr/bin/env python3
"""bench/torch_ref.py — PyTorch's side of bench/mlp.sh, bench/cnn.sh and bench/parallel.sh.

Measures PyTorch's CPU training speed on the workloads of gpurun's configs, built the
same way (layers, batch size, optimizer, learning rate, loss), and prints one JSON line:

  mlp       configs/fashion-mnist-mlp.yaml: flatten, 784-512-256-10 with ReLUs; batch 128,
            SGD lr 0.05 momentum 0.9, constant lr (bench/mlp.sh sets gpurun's schedule to
            constant too). Trains --epochs epochs of data/fashion-mnist.h5 /train and
            reports training samples/s and the accuracy on /test:
            {"workload": "mlp", "samples_per_s": ..., "train_s": ..., "test_accuracy": ..., ...}
  cnn       configs/fashion-mnist-cnn.yaml: (conv 3x3 pad 1, batchnorm, relu, maxpool 2) with
            32 then 64 filters, flatten, 3136-128-10; batch 64, SGD lr 0.05 momentum 0.9.
            Same measurement and output as mlp.
  resnet50  configs/resnet50.yaml: torchvision's resnet50() (v1.5, 25,557,032 parameters), SGD
            lr 0.256 momentum 0.875 weight decay 3.05e-5, cross-entropy with label smoothing
            0.1, at batch 8 (what bench/cnn.sh gives gpurun) on synthetic 224x224 tensors
            made once: one warm-up step, then --steps timed steps; reports the median:
            {"workload": "resnet50", "step_ms": ..., "samples_per_s": ..., "params": ..., ...}

Usage: bench/torch_ref.py mlp|cnn|resnet50 [--epochs N] [--threads T] [--steps S]
           [--batch B] [--size PX] [--channels-last] [--autocast bf16|fp16] [--data FILE.h5]
  --threads   torch.set_num_threads (default: all cores)
  --steps     resnet50: timed steps (default 3); mlp/cnn: stop after S training steps
              (default: all steps of --epochs), for a quick check
  --batch     0 (default): the config's batch size (mlp 128, cnn 64, resnet50 8)
  --size      resnet50's image side (default 224)
  --channels-last, --autocast are PyTorch's own speed settings (NHWC memory format for the
              model and its 4-d input; mixed precision through torch.autocast): bench/cnn.sh
              compares gpurun with PyTorch at its fastest setting per precision, fp32
              `--channels-last`, bf16 `--channels-last --autocast bf16`. A torch without fp16
              CPU autocast (Debian's 1.13) makes `--autocast fp16` exit 1 with its message.
  --data      the dataset for mlp/cnn (default: data/fashion-mnist.h5 of this repository, as
              `build/gpurun data fashion-mnist data/fashion-mnist.h5` writes it: /train and /test
              with images uint8 [N,1,28,28], labels [N], attrs mean/std in 0..255 units).

What is timed on mlp/cnn: the training steps alone (forward, loss, backward, optimizer step).
The data is read and normalized once before; each epoch's shuffled copy is made before that
epoch's clock starts, so the steps take contiguous slices of it (no data loading timed, as
gpurun's train_samples_per_s excludes evaluation and has its loader threads ahead of the
steps). An epoch's last partial batch is skipped (drop_last, as gpurun's training loader).
The test accuracy is computed after training, under torch.no_grad, untimed.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "fashion-mnist.h5")
EVAL_BATCH = 256  # the test split's batch (untimed; much larger ones run slower on small CPUs)

# the workloads' hyperparameters, from configs/*.yaml (resnet50's batch: bench/cnn.sh's)
HP = {
    "mlp": dict(batch=128, lr=0.05, momentum=0.9, weight_decay=0.0, label_smoothing=0.0),
    "cnn": dict(batch=64, lr=0.05, momentum=0.9, weight_decay=0.0, label_smoothing=0.0),
    "resnet50": dict(batch=8, lr=0.256, momentum=0.875, weight_decay=3.05e-5, label_smoothing=0.1),
}


def build_mlp():
    """configs/fashion-mnist-mlp.yaml: 535,818 parameters"""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(28 * 28, 512), nn.ReLU(),
        nn.Linear(512, 256), nn.ReLU(),
        nn.Linear(256, 10))


def build_cnn():
    """configs/fashion-mnist-cnn.yaml: 421,834 parameters"""
    def stage(cin, cout):
        return [nn.Conv2d(cin, cout, kernel_size=3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2)]
    return nn.Sequential(
        *stage(1, 32), *stage(32, 64),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10))


def build_resnet50():
    """configs/resnet50.yaml: torchvision's ResNet-50 v1.5, 25,557,032 parameters"""
    import torchvision
    return torchvision.models.resnet50()


BUILD = {"mlp": build_mlp, "cnn": build_cnn, "resnet50": build_resnet50}


def precision_context(autocast):
    """a fresh context for one forward pass: torch.autocast at the asked dtype, else nothing"""
    if autocast is None:
        return contextlib.nullcontext()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[autocast]
    return torch.autocast("cpu", dtype=dtype)


def check_autocast(autocast):
    """fail at once, with torch's own message, when this torch cannot autocast to that dtype on
    the CPU (torch 1.13 raises on fp16 when the context is entered; bench/cnn.sh reads the last
    line of stderr)"""
    if autocast is None:
        return
    try:
        with precision_context(autocast):
            torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    except RuntimeError as e:
        sys.exit(f"torch_ref.py: --autocast {autocast}: {str(e).strip()}")


def to_layout(model, channels_last):
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def layout(x, channels_last):
    if channels_last and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


def load_split(path, group):
    """images as normalized float32 [N,C,H,W] (the train split's mean/std attributes, stored
    units, as the configs' data.normalize) and labels as int64 [N]"""
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        g = f[group]
        x = g["images"][()]
        y = g["labels"][()].astype(np.int64)
        st = f["/train"].attrs
        mean = float(np.asarray(st.get("mean", 72.94)).reshape(-1)[0])
        std = float(np.asarray(st.get("std", 90.02)).reshape(-1)[0])
    if x.ndim == 3:
        x = x[:, None]
    x = (x.astype(np.float32) - np.float32(mean)) / np.float32(std)
    return torch.from_numpy(x), torch.from_numpy(y)


def train_fashion(model, a, hp):
    if not os.path.exists(a.data):
        sys.exit(f"torch_ref.py: {a.data}: not found; make it with "
                 f"`build/gpurun data fashion-mnist {os.path.relpath(a.data, ROOT)}` in the repository root")
    xtr, ytr = load_split(a.data, "/train")
    xte, yte = load_split(a.data, "/test")
    batch = a.batch or hp["batch"]
    model = to_layout(model, a.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=hp["momentum"],
                          weight_decay=hp["weight_decay"])
    gen = torch.Generator().manual_seed(0)
    per_epoch = len(xtr) // batch
    limit = a.steps if a.steps else a.epochs * per_epoch
    steps, train_s = 0, 0.0
    for _ in range(a.epochs):
        if steps >= limit:
            break
        # this epoch's shuffled copy, in the model's layout: made before the clock starts
        perm = torch.randperm(len(xtr), generator=gen)
        xs, ys = layout(xtr[perm], a.channels_last), ytr[perm]
        model.train()
        t0 = time.perf_counter()
        for i in range(min(per_epoch, limit - steps)):
            xb, yb = xs[i * batch:(i + 1) * batch], ys[i * batch:(i + 1) * batch]
            with precision_context(a.autocast):
                loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
        train_s += time.perf_counter() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xte), EVAL_BATCH):
            with precision_context(a.autocast):
                out = model(layout(xte[i:i + EVAL_BATCH], a.channels_last))
            correct += int((out.argmax(1) == yte[i:i + EVAL_BATCH]).sum())
    return {"samples_per_s": steps * batch / train_s, "train_s": train_s,
            "test_accuracy": correct / len(xte), "steps": steps, "batch": batch,
            "final_loss": float(loss)}


def train_resnet50(model, a, hp):
    batch = a.batch or hp["batch"]
    steps = a.steps if a.steps else 3
    model = to_layout(model, a.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=hp["momentum"],
                          weight_decay=hp["weight_decay"])
    x = layout(torch.randn(batch, 3, a.size, a.size), a.channels_last)
    y = torch.randint(0, 1000, (batch,))
    model.train()
    times = []
    for s in range(steps + 1):  # step 0 warms up (oneDNN primitives, allocations)
        t0 = time.perf_counter()
        with precision_context(a.autocast):
            loss = F.cross_entropy(model(x), y, label_smoothing=hp["label_smoothing"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s:
            times.append(time.perf_counter() - t0)
    ms = 1000.0 * statistics.median(times)
    return {"step_ms": ms, "samples_per_s": batch / (ms / 1000.0), "steps": steps, "batch": batch,
            "size": a.size, "params": sum(p.numel() for p in model.parameters())}


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU reference for bench/mlp.sh, cnn.sh, parallel.sh "
                                 "(one JSON line on stdout)")
    ap.add_argument("workload", choices=sorted(BUILD))
    ap.add_argument("--epochs", type=int, default=1, help="mlp/cnn: training epochs (default 1)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads (default: all cores)")
    ap.add_argument("--steps", type=int, default=0,
                    help="resnet50: timed steps (default 3); mlp/cnn: at most S training steps (default: all)")
    ap.add_argument("--batch", type=int, default=0, help="0: the config's (mlp 128, cnn 64, resnet50 8)")
    ap.add_argument("--size", type=int, default=224, help="resnet50: image side (default 224)")
    ap.add_argument("--channels-last", action="store_true", help="NHWC model and input")
    ap.add_argument("--autocast", choices=["bf16", "fp16"], help="torch.autocast on the CPU at this dtype")
    ap.add_argument("--data", default=DATA, help="mlp/cnn dataset (default: data/fashion-mnist.h5)")
    a = ap.parse_args()
    if a.epochs < 1 or a.steps < 0 or a.batch < 0 or a.threads < 1:
        ap.error("--epochs and --threads must be >= 1, --steps and --batch >= 0")

    torch.set_num_threads(a.threads)
    torch.autograd.set_detect_anomaly(False)
    check_autocast(a.autocast)
    torch.manual_seed(0)
    hp = HP[a.workload]
    model = BUILD[a.workload]()
    if a.workload == "resnet50":
        r = train_resnet50(model, a, hp)
    else:
        r = train_fashion(model, a, hp)
    r.update(workload=a.workload, threads=a.threads, torch=torch.__version__,
             channels_last=a.channels_last, autocast=a.autocast)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
