#!/usr/bin/env python3
"""Reads a gpurun checkpoint (or a run's weights.h5) with h5py into PyTorch.

The layout (DESIGN 1.6): root attributes describe the run (format, version,
step, epoch, sample_in_epoch, world_size, precision, loss_scale, rng,
optimizer, spec); /params/<layer>/<tensor> and /state/<layer>/<tensor> hold
the model in PyTorch's shapes, /optim/<layer>/<tensor>/<slot> the optimizer
state (momentum_buffer, or exp_avg and exp_avg_sq); every dataset carries a
crc32c attribute. A tensor's state_dict key is "<layer>.<tensor>", so a
torch module whose submodules are named like gpurun's layers loads it with
load_state_dict(strict=True).

    python3 docs/checkpoint_reader.py runs/job/checkpoints/step-000001200.h5
    python3 docs/checkpoint_reader.py CKPT.h5 --mlp 784,512,256,10   # load into a torch MLP

In your own code:

    import h5py, torch
    from checkpoint_reader import state_dict
    sd = state_dict("runs/job/checkpoints/step-000001200.h5")
    model.load_state_dict(sd)
"""
import argparse
import h5py
import numpy as np
import torch


def state_dict(path):
    """{"<layer>.<tensor>": torch.Tensor} for /params and /state."""
    sd = {}
    with h5py.File(path, "r") as f:
        for top in ("params", "state"):
            if top not in f:
                continue
            for layer, grp in f[top].items():
                for name, ds in grp.items():
                    sd[f"{layer}.{name}"] = torch.from_numpy(np.asarray(ds[...], dtype=np.float32))
    return sd


def header(path):
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--mlp", help="sizes like 784,512,10: build flatten + dense0.. with relu, load strictly")
    a = ap.parse_args()
    h = header(a.file)
    for k, v in h.items():
        if k != "spec":
            print(f"{k}: {v}")
    sd = state_dict(a.file)
    for k, t in sd.items():
        print(f"{k:40s} {tuple(t.shape)}")
    if a.mlp:
        sizes = [int(s) for s in a.mlp.split(",")]
        model = torch.nn.Module()
        for i in range(len(sizes) - 1):
            model.add_module(f"dense{i}", torch.nn.Linear(sizes[i], sizes[i + 1]))
        model.load_state_dict(sd, strict=True)  # raises on a missing, extra or mis-shaped tensor
        print(f"loaded into a torch MLP {sizes}: ok")


if __name__ == "__main__":
    main()
