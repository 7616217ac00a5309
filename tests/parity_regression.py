#!/usr/bin/python3
"""parity_regression.py — jobs that are not image classifiers, through the gpurun binary, against
PyTorch on the same weights and the same inputs:

    /usr/bin/python3 tests/parity_regression.py PATH/TO/gpurun TMPDIR

  houses   examples/regression/houses.csv through `gpurun data csv` (features normalized by the
           per-column mean/std it stores), model.inputs [features] and model.targets [targets],
           dense 8 -> relu -> dense 1, mse, SGD with momentum;
  two      a table written here with two inputs a [N, 3] and b [N, 2] joined by name (a dense on
           each, add, relu, dense 2) and a target [N, 2], mse, AdamW;
  bce      the houses features against three 0/1 targets made here, bce_with_logits, SGD.

Each trains K steps in file order (shuffle off, one micro-batch a step) from init.h5 (torch's
own init, seeded, in DESIGN 1.6's /params layout); the per-step losses of metrics.jsonl must be
within 1e-4 relative of torch's, and every tensor of weights.h5 within 1e-5 * max(1, |w|).
Prints one line per case; exits 1 on a failure, 77 when torch, numpy or h5py are missing."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402

need("numpy", "torch", "h5py")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, BATCH = 8, 16


def write_init(path, mods):
    with h5py.File(path, "w") as f:
        for name, m in mods.items():
            f.create_dataset("params/%s/weight" % name, data=m.weight.detach().numpy())
            f.create_dataset("params/%s/bias" % name, data=m.bias.detach().numpy())


def job_yaml(name, data, init, inputs, target, layers, loss, opt):
    return "\n".join([
        "name: %s" % name, "seed: 0",
        "data: {train: {path: %s, group: /train}, shuffle: false, workers: 0}" % json.dumps(data),
        "model:", "  init_from: %s" % json.dumps(init),
        "  inputs: [%s]" % ", ".join(inputs), "  targets: [%s]" % target,
        "  layers: [%s]" % ", ".join(layers),
        "train:", "  batch_size: %d" % BATCH, "  steps: %d" % STEPS, "  optimizer: %s" % opt,
        "  loss: {type: %s}" % loss, "log: {every_steps: 1, tensorboard: false}", ""])


def run_gpurun(gpurun, d, yaml):
    path = os.path.join(d, "job.yaml")
    open(path, "w").write(yaml)
    r = subprocess.run([gpurun, path, "--run-dir", os.path.join(d, "run"), "--quiet", "--device", "cpu"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        return None, None, "gpurun exited %d: %s" % (r.returncode, r.stdout)
    losses = [json.loads(l)["loss"] for l in open(os.path.join(d, "run", "metrics.jsonl"))
              if json.loads(l)["kind"] == "train"]
    with h5py.File(os.path.join(d, "run", "weights.h5"), "r") as f:
        w = {k + "/" + t: f["params"][k][t][()] for k in f["params"] for t in f["params"][k]}
    return losses, w, None


def compare(name, losses, weights, th_losses, mods):
    fails = []
    if len(losses) != len(th_losses):
        fails.append("%d train lines, expected %d" % (len(losses), len(th_losses)))
    worst_l = max((abs(a - b) / abs(b) for a, b in zip(losses, th_losses)), default=0.0)
    if worst_l > 1e-4:
        fails.append("losses differ by %.2e (rel): gpurun %s torch %s" % (worst_l, losses, th_losses))
    worst_w = 0.0
    for m, mod in mods.items():
        for t in ("weight", "bias"):
            want = getattr(mod, t).detach().numpy().astype(np.float64)
            got = weights.get("%s/%s" % (m, t))
            if got is None:
                fails.append("weights.h5 lacks %s/%s" % (m, t))
                continue
            diff = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
            worst_w = max(worst_w, diff)
            if diff > 1e-5:
                fails.append("%s/%s: max rel diff %.2e" % (m, t, diff))
    print("%-7s losses %d, worst loss rel %.2e, worst weight rel %.2e  %s" % (
        name, len(losses), worst_l, worst_w, "FAIL" if fails else "ok"))
    for f in fails:
        print("  FAIL %s: %s" % (name, f))
    return not fails


def train_torch(forward, params, batches, loss_fn, opt):
    o = opt(params)
    out = []
    for xs, y in batches:
        loss = loss_fn(forward(*xs), y)
        out.append(loss.item())
        o.zero_grad()
        loss.backward()
        o.step()
    return out


def case_houses(gpurun, tmp, bce=False):
    name = "bce" if bce else "houses"
    d = os.path.join(tmp, name)
    os.makedirs(d)
    data = os.path.join(d, "houses.h5")
    r = subprocess.run([gpurun, "data", "csv", data, "--from", os.path.join(SRC, "examples/regression/houses.csv"),
                        "--target", "price_k"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        print("  FAIL %s: gpurun data csv: %s" % (name, r.stdout))
        return False
    with h5py.File(data, "r+") as f:
        x, y = f["train/features"][()], f["train/targets"][()]
        mean, std = f["train/features"].attrs["mean"], f["train/features"].attrs["std"]
        if bce:  # three 0/1 tags from the price and the area
            tags = np.stack([y[:, 0] > 200, x[:, 0] > 100, (y[:, 0] > 150) & (x[:, 1] > 3)], 1).astype(np.float32)
            f.create_dataset("train/tags", data=tags)
            y = tags
    xn = torch.from_numpy(((x.astype(np.float64) - mean) / std).astype(np.float32))
    yt = torch.from_numpy(y.astype(np.float32))
    torch.manual_seed(1)
    l0, l1 = torch.nn.Linear(4, 8), torch.nn.Linear(8, y.shape[1])
    mods = {"dense0": l0, "dense1": l1}
    init = os.path.join(d, "init.h5")
    write_init(init, mods)
    opt = "{type: sgd, lr: %s, momentum: 0.9}" % ("0.5" if bce else "0.001")
    losses, w, err = run_gpurun(gpurun, d, job_yaml(name, data, init, ["features"], "tags" if bce else "targets",
                                                    ["{dense: {units: 8}}", "relu", "{dense: {units: %d}}" % y.shape[1]],
                                                    "bce_with_logits" if bce else "mse", opt))
    if err:
        print("  FAIL %s: %s" % (name, err))
        return False
    batches = [((xn[i * BATCH:(i + 1) * BATCH],), yt[i * BATCH:(i + 1) * BATCH]) for i in range(STEPS)]
    loss_fn = F.binary_cross_entropy_with_logits if bce else F.mse_loss
    th = train_torch(lambda a: l1(torch.relu(l0(a))), list(l0.parameters()) + list(l1.parameters()), batches,
                     loss_fn, lambda p: torch.optim.SGD(p, lr=0.5 if bce else 0.001, momentum=0.9))
    return compare(name, losses, w, th, mods)


def case_two(gpurun, tmp):
    d = os.path.join(tmp, "two")
    os.makedirs(d)
    rng = np.random.default_rng(7)
    n = BATCH * STEPS
    a, b = rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((n, 2)).astype(np.float32)
    y = np.stack([a[:, 0] * 2 - b[:, 1], a[:, 1] * b[:, 0]], 1).astype(np.float32)
    data = os.path.join(d, "two.h5")
    with h5py.File(data, "w") as f:
        f.create_dataset("train/a", data=a)
        f.create_dataset("train/b", data=b)
        f.create_dataset("train/y", data=y)
    torch.manual_seed(2)
    pa, pb, out = torch.nn.Linear(3, 6), torch.nn.Linear(2, 6), torch.nn.Linear(6, 2)
    mods = {"pa": pa, "pb": pb, "dense2": out}  # <op><k> counts named layers too (DESIGN 1.4)
    init = os.path.join(d, "init.h5")
    write_init(init, mods)
    layers = ["{dense: {units: 6}, input: a, name: pa}", "{dense: {units: 6}, input: b, name: pb}",
              "{add: {}, input: [pa, pb]}", "relu", "{dense: {units: 2}}"]
    losses, w, err = run_gpurun(gpurun, d, job_yaml("two", data, init, ["a", "b"], "y", layers, "mse",
                                                    "{type: adamw, lr: 0.01, weight_decay: 0.01}"))
    if err:
        print("  FAIL two: %s" % err)
        return False
    at, bt, yt = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(y)
    batches = [((at[i * BATCH:(i + 1) * BATCH], bt[i * BATCH:(i + 1) * BATCH]), yt[i * BATCH:(i + 1) * BATCH])
               for i in range(STEPS)]
    params = [p for m in (pa, pb, out) for p in m.parameters()]
    th = train_torch(lambda u, v: out(torch.relu(pa(u) + pb(v))), params, batches, F.mse_loss,
                     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.01))
    return compare("two", losses, w, th, mods)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: parity_regression.py PATH/TO/gpurun TMPDIR")
    gpurun, tmp = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    torch.set_num_threads(1)
    ok = [case_houses(gpurun, tmp), case_two(gpurun, tmp), case_houses(gpurun, tmp, bce=True)]
    print("%d of %d cases passed" % (sum(ok), len(ok)))
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
