#!/usr/bin/python3
"""bn_torch.py OUT — PyTorch references for tests/ops/test_op_bn.c and test_op_pool.c.

Writes inputs and torch 1.x results (float32, CPU) of batchnorm (train
forward twice, backward, running stats, eval forward), maxpool (with ties),
avgpool (count_include_pad true/false, non-square) and global_avgpool
(AdaptiveAvgPool2d(1)) to OUT, as named float32 arrays:
    b"GRBN" then, per array: u32 name length, name, u32 count, count float32.
test_op_bn.c and test_op_pool.c run the same layers through gpurun's kernels
and compare. Case names and shapes must match their tables."""
import struct
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("torch")
import torch
import torch.nn as nn

torch.manual_seed(1234)
arrays = []


def put(name, t):
    arrays.append((name, t.detach().reshape(-1).to(torch.float32).contiguous()))


def bn_case(name, shape, momentum, eps, offsets):
    c = shape[1]
    view = (1, c) + (1,) * (len(shape) - 2)
    bn = nn.BatchNorm2d(c, momentum=momentum, eps=eps) if len(shape) == 4 else \
        nn.BatchNorm1d(c, momentum=momentum, eps=eps)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(c))
        bn.bias.copy_(torch.randn(c))
    put(name + ".weight", bn.weight)
    put(name + ".bias", bn.bias)
    off = torch.tensor(offsets, dtype=torch.float32).reshape(view)
    x1 = torch.randn(shape) * 2 + off
    x2 = (torch.randn(shape) * 0.5 + off).requires_grad_(True)
    x3 = torch.randn(shape) + off
    dy = torch.randn(shape)
    bn.train()
    bn(x1)
    y2 = bn(x2)
    y2.backward(dy)
    put(name + ".x1", x1)
    put(name + ".x2", x2)
    put(name + ".dy", dy)
    put(name + ".y2", y2)
    put(name + ".dx", x2.grad)
    put(name + ".dweight", bn.weight.grad)
    put(name + ".dbias", bn.bias.grad)
    put(name + ".running_mean", bn.running_mean)
    put(name + ".running_var", bn.running_var)
    bn.eval()
    put(name + ".x3", x3)
    put(name + ".y3", bn(x3))


def pool_case(name, mod, shape, ties=False):
    x = torch.randint(0, 4, shape).float() if ties else torch.randn(shape)
    x.requires_grad_(True)
    out = mod(x)
    y, idx = out if isinstance(out, tuple) else (out, None)
    dy = torch.randn(y.shape)
    y.backward(dy)
    put(name + ".x", x)
    put(name + ".y", y)
    put(name + ".dy", dy)
    put(name + ".dx", x.grad)
    if idx is not None:
        put(name + ".idx", idx.float())


bn_case("bn4", (4, 3, 5, 6), 0.1, 1e-5, [5.0, -3.0, 0.5])
bn_case("bn4m", (2, 2, 3, 3), 0.3, 1e-3, [100.0, 0.0])
bn_case("bn2", (6, 5), 0.1, 1e-5, [0.0, 1.0, -2.0, 10.0, 0.0])
pool_case("max_ties", nn.MaxPool2d(3, 2, 1, return_indices=True), (2, 3, 7, 8), ties=True)
pool_case("max_2x2", nn.MaxPool2d(2, return_indices=True), (2, 2, 6, 6))
pool_case("max_rect", nn.MaxPool2d((3, 2), (2, 1), (1, 1), return_indices=True), (2, 2, 6, 5))
pool_case("max_s3", nn.MaxPool2d(3, 3, 1, return_indices=True), (2, 2, 7, 10))
pool_case("avg_incl", nn.AvgPool2d(3, 2, 1, count_include_pad=True), (2, 3, 7, 8))
pool_case("avg_excl", nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 7, 8))
pool_case("avg_rect", nn.AvgPool2d((3, 2), (2, 1), (1, 1), count_include_pad=False), (2, 2, 6, 5))
pool_case("avg_wide", nn.AvgPool2d(3, 1, 1, count_include_pad=False), (2, 1, 3, 600))
pool_case("gap", nn.AdaptiveAvgPool2d(1), (2, 3, 5, 4))

with open(sys.argv[1], "wb") as f:
    f.write(b"GRBN")
    for name, t in arrays:
        nb = name.encode()
        f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<I", t.numel()))
        f.write(t.numpy().astype("<f4").tobytes())
