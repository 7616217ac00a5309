#!/usr/bin/python3
"""parity_autocast.py — gpurun's `precision: bf16` against PyTorch's
torch.autocast(bfloat16) on a ResNet of CIFAR-10's shape.

    /usr/bin/python3 tests/parity_autocast.py PATH/TO/gpurun TMPDIR

The model is tests/parity_cnn.py's small ResNet (a stem, a stage block
nesting a basic block, two repeated basic blocks, a projection block, global
average pooling, a dense head) on 3x32x32 images, batch 16, 6 SGD steps
(momentum 0.9, nesterov, weight decay 0.01), from torch's own initial weights
(batchnorm's redrawn, as parity_cnn.py does). gpurun runs the job with
`precision: bf16`; torch runs the same steps three times: in fp32, under
torch.autocast("cpu", dtype=torch.bfloat16) (convolutions and the dense layer
in bf16 with bf16 weights, as PyTorch's CPU autocast does), and in fp64.

Both sides round differently (gpurun stores every activation in bf16 and
computes batchnorm, relu and add in fp32 from it; autocast runs only its
listed ops in bf16), so the comparison is of size, not bits. Checked:
  - every step's loss: |gpurun - autocast| <= 2e-2 * |autocast|;
  - and at most 3 times as far from autocast's as autocast's is from fp32's
    at that step, plus 2e-3 (both are bf16 runs of one model: neither may
    drift much further from the other than bf16 rounding moves a run);
  - every final parameter that moved: ||gpurun - autocast||_2 <= 3 *
    ||autocast - fp32||_2 + 1e-2 * ||autocast - w0||_2 (on random data the
    gradients are small and bf16's rounding alone moves a conv's 6-step
    update by ~25%: autocast's distance to fp32 is the scale).
Prints the per-step losses and the largest ratios; exits 1 on a failure.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402

need("h5py", "numpy", "torch")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import parity_cnn as pc  # noqa: E402 (its Net, job_yaml and weight files)

LOSS_RTOL = 2e-2
DRIFT_MULT, DRIFT_FLOOR = 3.0, 2e-3
UPDATE_FLOOR = 1e-2
CASE = ("autocast", pc.RESNET_BLOCKS, pc.RESNET_LAYERS, (3, 32, 32), 10, 16, 6,
        {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, None)


def train(net, images, labels, batch, steps, opt, autocast):
    sgd = torch.optim.SGD(net.parameters(), lr=opt["lr"], momentum=opt["momentum"], nesterov=opt["nesterov"],
                          weight_decay=opt["weight_decay"])
    net.train()
    dtype = next(net.parameters()).dtype
    X, Y = torch.from_numpy(images).to(dtype), torch.from_numpy(labels.astype(np.int64))
    losses = []
    for s in range(steps):
        xb, yb = X[s * batch:(s + 1) * batch], Y[s * batch:(s + 1) * batch]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(net(xb), yb)
        losses.append(float(loss))
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    return losses


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: parity_autocast.py PATH/TO/gpurun TMPDIR")
    gpurun, d = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    torch.set_num_threads(1)
    name, blocks, layers, in_shape, classes, batch, steps, opt, _n = CASE
    torch.manual_seed(1234)
    net = pc.Net(blocks, layers, in_shape)
    init_path, data_path, job = (os.path.join(d, f) for f in ("init.h5", "data.h5", "job.yaml"))
    w0 = pc.write_init(net, init_path)
    rng = np.random.default_rng(1234)
    images = rng.standard_normal((batch * steps,) + in_shape).astype(np.float32)
    labels = rng.integers(0, classes, size=batch * steps).astype(np.int32)
    labels[:classes] = np.arange(classes)
    with h5py.File(data_path, "w") as f:
        f.create_dataset("train/images", data=images)
        f.create_dataset("train/labels", data=labels)
    with open(job, "w") as f:
        f.write(pc.job_yaml(CASE, data_path, init_path) + "precision: bf16\n")
    run_dir = os.path.join(d, "run")
    r = subprocess.run([gpurun, job, "--run-dir", run_dir, "--quiet", "--device", "cpu"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        print("FAIL gpurun exited %d:\n%s" % (r.returncode, r.stdout))
        sys.exit(1)
    gr = [m["loss"] for m in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl"))) if m["kind"] == "train"]
    detail = json.load(open(os.path.join(run_dir, "summary.json")))["device_detail"]

    nets = {k: pc.copy.deepcopy(net) for k in ("fp32", "bf16")}
    nets["fp64"] = pc.copy.deepcopy(net).double()
    th = {k: train(n, images, labels, batch, steps, opt, k == "bf16") for k, n in nets.items()}

    fails = []
    print("device: %s" % detail)
    print("%4s %10s %10s %10s %10s %12s %12s" % ("step", "gpurun", "autocast", "torch fp32", "torch fp64",
                                               "rel(gr,ac)", "rel(ac,fp32)"))
    worst_rel = worst_drift = 0.0
    for s in range(steps):
        a, b, c = gr[s], th["bf16"][s], th["fp32"][s]
        rel, ref = abs(a - b) / abs(b), abs(b - c) / abs(c)
        print("%4d %10.5f %10.5f %10.5f %10.5f %12.2e %12.2e" % (s + 1, a, b, c, th["fp64"][s], rel, ref))
        worst_rel = max(worst_rel, rel)
        worst_drift = max(worst_drift, rel / (DRIFT_MULT * ref + DRIFT_FLOOR))
        if not rel <= LOSS_RTOL:
            fails.append("step %d: loss %.6g, autocast %.6g (rel %.2e > %.0e)" % (s + 1, a, b, rel, LOSS_RTOL))
        if not rel <= DRIFT_MULT * ref + DRIFT_FLOOR:
            fails.append("step %d: rel %.2e from autocast, autocast is %.2e from fp32" % (s + 1, rel, ref))
    with h5py.File(os.path.join(run_dir, "weights.h5"), "r") as f:
        got = {("params", k): v for k, v in pc.read_group(f, "params").items()}
    want, ref32 = nets["bf16"].arrays(), nets["fp32"].arrays()
    worst_upd, worst_name = 0.0, ""
    for k in sorted(set(got) & set(want)):
        a, b, c, base = got[k].astype(np.float64), want[k], ref32[k], w0[k[1]]
        moved = float(np.linalg.norm(b - base))
        if moved < 1e-6:
            continue
        dist, own = float(np.linalg.norm(a - b)), float(np.linalg.norm(b - c))
        used = dist / (DRIFT_MULT * own + UPDATE_FLOOR * moved)
        if used > worst_upd:
            worst_upd, worst_name = used, "/%s/%s" % k
        if used > 1.0:
            fails.append("/%s/%s: ||gpurun - autocast|| %.3e, ||autocast - fp32|| %.3e, update %.3e" % (
                k[0], k[1], dist, own, moved))
    if not any(k[0] == "params" for k in got):
        fails.append("weights.h5 holds no parameters")
    print("largest loss rel %.2e (bound %.0e); loss drift ratio %.2f, weight drift ratio %.2f (%s) (bounds 1)" % (
        worst_rel, LOSS_RTOL, worst_drift, worst_upd, worst_name))
    for msg in fails:
        print("FAIL " + msg)
    print("%d failed" % len(fails) if fails else "passed")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
