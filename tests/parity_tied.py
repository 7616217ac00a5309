#!/usr/bin/python3
"""parity_tied.py — tied (shared) dense weights in the gpurun binary against PyTorch.

    /usr/bin/python3 tests/parity_tied.py PATH/TO/gpurun TMPDIR

The model is an autoencoder-style MLP on 8x8 inputs whose decoder uses the
encoder's weight transposed, plus a layer that reuses another's weight as it
is (without a bias of its own), then a classifier:

    flatten -> enc: dense 16 -> tanh -> mid: dense 16 -> tanh
            -> mid2: dense 16, tied: mid, bias: false -> tanh
            -> dec: dense 64, tied: enc, transpose: true -> sigmoid -> head: dense 10

In torch the same network reads one nn.Parameter per shared weight
(F.linear(h, enc.weight.t(), dec_bias)), so autograd sums the readers'
gradients. The script writes torch's initial weights (init_from) and the
batches (float32, used as stored) to HDF5, runs gpurun (shuffle false, log
every step) and compares:
  1. `gpurun plan`'s total parameters with torch's parameter count (a shared
     weight counted once), and weights.h5's tensors with torch's parameters
     (enc.weight stored once; no dec/weight, mid2/weight or mid2/bias);
  2. the gradients of one step: a run of 1 SGD step at lr 1 (no momentum or
     decay) moves every weight by minus its gradient, so w0 - w1 is gpurun's
     gradient: max|gpurun - torch| <= 1e-4 * max|torch| + 1e-6 per tensor,
     and the loss to 1e-5 relative; the shared weights' gradients are also
     checked to differ from any one reader's (the sum is what is checked);
  3. 6 SGD steps with momentum and weight decay: every step's loss to 1e-4
     relative, every final tensor to 1e-4 * max(1, max|torch|).
Exits 1 on any mismatch, 77 (skipped) without torch, numpy or h5py.
PARITY_DEVICE=cuda runs gpurun on a GPU instead of the CPU.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("h5py", "numpy", "torch")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

IN, HID, CLASSES, BATCH = 64, 16, 10, 16

LAYERS = """\
    - flatten
    - {dense: {units: 16}, name: enc}
    - tanh
    - {dense: {units: 16}, name: mid}
    - tanh
    - {dense: {units: 16, tied: mid, bias: false}, name: mid2}
    - tanh
    - {dense: {units: 64, tied: enc, transpose: true}, name: dec}
    - sigmoid
    - {dense: {units: 10}, name: head}
"""


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(IN, HID)
        self.mid = nn.Linear(HID, HID)
        # dec's own bias, drawn as nn.Linear(16, 64) draws one: U(+-1/sqrt(16))
        self.dec_bias = nn.Parameter(torch.empty(IN).uniform_(-HID ** -0.5, HID ** -0.5))
        self.head = nn.Linear(IN, CLASSES)

    def forward(self, x):
        h = torch.tanh(self.enc(x.flatten(1)))
        h = torch.tanh(self.mid(h))
        h = torch.tanh(F.linear(h, self.mid.weight))
        h = torch.sigmoid(F.linear(h, self.enc.weight.t(), self.dec_bias))
        return self.head(h)

    def tensors(self):
        """{"<layer>/<tensor>": parameter} in gpurun's names"""
        return {"enc/weight": self.enc.weight, "enc/bias": self.enc.bias, "mid/weight": self.mid.weight,
                "mid/bias": self.mid.bias, "dec/bias": self.dec_bias, "head/weight": self.head.weight,
                "head/bias": self.head.bias}


def job_yaml(name, data, init, steps, opt):
    return "\n".join([
        "name: %s" % name, "seed: 0", "data:",
        "  train: {path: %s, group: /train}" % json.dumps(data),
        "  shuffle: false", "  workers: 1", "model:",
        "  init_from: %s" % json.dumps(init), "  layers:"]) + "\n" + LAYERS + "\n".join([
            "train:", "  batch_size: %d" % BATCH, "  steps: %d" % steps,
            "  optimizer: {type: sgd, lr: %r, momentum: %r, weight_decay: %r}" % (
                opt["lr"], opt["momentum"], opt["weight_decay"]),
            "  loss: {type: softmax_cross_entropy}",
            "log: {every_steps: 1, tensorboard: false}"]) + "\n"


def run_gpurun(gpurun, d, name, data, init, steps, opt, device, fails):
    """runs the job; returns (losses by step, weights.h5's params by name) or None"""
    job = os.path.join(d, name + ".yaml")
    with open(job, "w") as f:
        f.write(job_yaml(name, data, init, steps, opt))
    run_dir = os.path.join(d, name)
    r = subprocess.run([gpurun, job, "--run-dir", run_dir, "--quiet", "--device", device],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        fails.append("%s: gpurun exited %d:\n%s" % (name, r.returncode, r.stdout))
        return None
    losses = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if m.get("kind") == "train":
                losses[m["step"]] = m["loss"]
    params = {}
    with h5py.File(os.path.join(run_dir, "weights.h5"), "r") as f:
        f["params"].visititems(lambda n, o: params.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return losses, params


def check_names(params, net, fails):
    want = set(net.tensors())
    for k in sorted(want - set(params)):
        fails.append("weights.h5 lacks /params/%s" % k)
    for k in sorted(set(params) - want):
        fails.append("weights.h5 has /params/%s, which the tied model does not own" % k)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: parity_tied.py PATH/TO/gpurun TMPDIR")
    gpurun, tmp = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    device = os.environ.get("PARITY_DEVICE", "cpu")
    torch.set_num_threads(1)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    fails = []
    torch.manual_seed(24)
    net = Tied()
    w0 = {k: v.detach().numpy().astype(np.float32) for k, v in net.tensors().items()}
    init = os.path.join(tmp, "init.h5")
    with h5py.File(init, "w") as f:
        for k, v in w0.items():
            f.create_dataset("params/" + k, data=v)
    steps = 6
    rng = np.random.default_rng(24)
    images = rng.standard_normal((BATCH * steps, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, CLASSES, size=BATCH * steps).astype(np.int32)
    labels[:CLASSES] = np.arange(CLASSES)
    data = os.path.join(tmp, "data.h5")
    with h5py.File(data, "w") as f:
        f.create_dataset("train/images", data=images)
        f.create_dataset("train/labels", data=labels)
    X, Y = torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))

    # 1. the parameter count: the shared weights once
    grad_opt = {"lr": 1.0, "momentum": 0.0, "weight_decay": 0.0}
    with open(os.path.join(tmp, "plan.yaml"), "w") as f:
        f.write(job_yaml("plan", data, init, 1, grad_opt))
    r = subprocess.run([gpurun, "plan", os.path.join(tmp, "plan.yaml"), "--set", "device=cpu"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    m = re.search(r"total parameters: ([\d,]+)", r.stdout)
    count = sum(p.numel() for p in net.parameters())
    if r.returncode != 0 or not m:
        fails.append("gpurun plan exited %d:\n%s" % (r.returncode, r.stdout))
    elif int(m.group(1).replace(",", "")) != count:
        fails.append("gpurun plan: %s parameters, torch %d" % (m.group(1), count))

    # 2. one step's gradients: w0 - w1 at lr 1
    out = run_gpurun(gpurun, tmp, "grad", data, init, 1, grad_opt, device, fails)
    loss = F.cross_entropy(net(X[:BATCH]), Y[:BATCH])
    net.zero_grad()
    loss.backward()
    grads = {k: v.grad.numpy().astype(np.float64) for k, v in net.tensors().items()}
    worst_g = 0.0
    if out:
        losses, params = out
        check_names(params, net, fails)
        if abs(losses.get(1, float("nan")) - loss.item()) > 1e-5 * abs(loss.item()):
            fails.append("grad: loss %r, torch %r" % (losses.get(1), loss.item()))
        for k, g in grads.items():
            if k not in params:
                continue
            a = w0[k].astype(np.float64) - params[k].astype(np.float64)
            diff, scale = float(np.max(np.abs(a - g))), float(np.max(np.abs(g)))
            worst_g = max(worst_g, diff / (scale + 1e-30))
            if not diff <= 1e-4 * scale + 1e-6:
                fails.append("grad: %s: max|gpurun - torch| %.3e (torch's largest %.3e)" % (k, diff, scale))
    # each reader's own part of a shared weight's gradient, so that the sum is what is checked
    with torch.no_grad():
        h1 = torch.tanh(net.enc(X[:BATCH].flatten(1)))
    for k, part in (("enc/weight", "encoder"), ("mid/weight", "mid")):
        e = net.tensors()[k]
        alone = e.detach().clone().requires_grad_(True)
        if k == "enc/weight":  # the encoder's read alone: the decoder gets a constant copy
            h = torch.tanh(F.linear(X[:BATCH].flatten(1), alone, net.enc.bias))
            h = torch.tanh(net.mid(h))
            h = torch.tanh(F.linear(h, net.mid.weight))
            h = torch.sigmoid(F.linear(h, e.detach().t(), net.dec_bias))
        else:  # mid's read alone: mid2 gets a constant copy
            h = torch.tanh(F.linear(h1, alone, net.mid.bias))
            h = torch.tanh(F.linear(h, net.mid.weight.detach()))
            h = torch.sigmoid(F.linear(h, net.enc.weight.t(), net.dec_bias))
        F.cross_entropy(net.head(h), Y[:BATCH]).backward()
        one = alone.grad.numpy().astype(np.float64)
        if not np.max(np.abs(one - grads[k])) > 1e-3 * np.max(np.abs(grads[k])):
            fails.append("%s: the summed gradient equals the %s's part alone; the test checks nothing" % (k, part))

    # 3. a few SGD steps with momentum and weight decay
    opt = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}
    torch.manual_seed(24)
    net = Tied()
    sgd = torch.optim.SGD(net.parameters(), lr=opt["lr"], momentum=opt["momentum"], weight_decay=opt["weight_decay"])
    th_losses = []
    for s in range(steps):
        loss = F.cross_entropy(net(X[s * BATCH:(s + 1) * BATCH]), Y[s * BATCH:(s + 1) * BATCH])
        th_losses.append(loss.item())
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    out = run_gpurun(gpurun, tmp, "train", data, init, steps, opt, device, fails)
    worst_l = worst_w = 0.0
    if out:
        losses, params = out
        check_names(params, net, fails)
        for s in range(steps):
            a, b = losses.get(s + 1, float("nan")), th_losses[s]
            worst_l = max(worst_l, abs(a - b) / abs(b))
            if not abs(a - b) <= 1e-4 * abs(b):
                fails.append("train: step %d loss %r, torch %r" % (s + 1, a, b))
        for k, v in net.tensors().items():
            if k not in params:
                continue
            b = v.detach().numpy().astype(np.float64)
            diff, scale = float(np.max(np.abs(params[k] - b))), max(1.0, float(np.max(np.abs(b))))
            worst_w = max(worst_w, diff / scale)
            if not diff <= 1e-4 * scale:
                fails.append("train: %s: max|gpurun - torch| %.3e" % (k, diff))
    print("tied parity (device %s): %d parameters; gradient rel %.2e; losses rel %.2e; weights rel %.2e"
          % (device, count, worst_g, worst_l, worst_w))
    for f in fails:
        print("  FAIL " + f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
