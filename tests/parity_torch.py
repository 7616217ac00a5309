#!/usr/bin/python3
"""parity_torch.py — numerical parity of gpurun against PyTorch on the same
weights and inputs.

    /usr/bin/python3 tests/parity_torch.py PATH/TO/parity_dump [DEVICE]

For each model below it draws weights, a batch and labels with numpy (fixed
seed), runs tests/tools/parity_dump (gpurun's graph -> autodiff -> plan ->
kernels -> optimizer) on them, builds the same torch.nn.Sequential with the
same weights, and compares:
  - the parameter table (names, offsets, shapes in PyTorch layout);
  - the mean loss (rtol 1e-5) and the correct count of one training step,
    and of an eval-mode forward (dropout off);
  - every parameter gradient: max|diff| <= 1e-5 * max|grad| + 1e-7;
  - the losses and the weights after each of K steps of SGD (nesterov,
    momentum 0.9, wd 1e-4) and of AdamW (lr 1e-3, wd 0.01) on the same batch:
    per tensor, max|diff| <= min(1e-5 * max|param|, 1e-4 * max|update so
    far|) + 1e-7 (the second bound makes AdamW's 1e-3 steps count).
Models with dropout rate > 0 are compared in eval mode only (their training
masks are gpurun's own RNG stream). Prints one line per check and ends with
"N passed, M failed"; exits 1 on any failure. DEVICE (default cpu, or the
PARITY_DEVICE environment variable) is passed to parity_dump.
"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

K_STEPS = 3
SGD = dict(lr=0.1, momentum=0.9, weight_decay=1e-4)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)

# name, layers (op, arg), per-sample input shape, batch, label smoothing.
# ("dense", units[, bias]) ("dropout", rate) ("flatten",) ("relu",) ...
CONFIGS = [
    ("mlp relu/gelu", [("flatten",), ("dense", 32), ("relu",), ("dense", 16), ("gelu",), ("dense", 10)],
     (1, 8, 8), 16, 0.0),
    ("sigmoid/tanh smoothing 0.1", [("dense", 24), ("sigmoid",), ("dense", 20), ("tanh",), ("dense", 7)],
     (12,), 12, 0.1),
    ("no-bias + dropout 0", [("flatten",), ("dense", 20, False), ("dropout", 0.0), ("tanh",), ("gelu",),
                             ("dense", 5)], (2, 3, 4), 9, 0.0),
    ("dropout 0.5 (eval)", [("flatten",), ("dense", 16), ("relu",), ("dropout", 0.5), ("dense", 6)],
     (3, 5), 10, 0.05),
]


def yaml_layers(layers):
    items = []
    for layer in layers:
        op = layer[0]
        if op == "dense":
            bias = "" if len(layer) < 3 or layer[2] else ", bias: false"
            items.append("{dense: {units: %d%s}}" % (layer[1], bias))
        elif op == "dropout":
            items.append("{dropout: {rate: %r}}" % layer[1])
        else:
            items.append(op)
    return "[" + ", ".join(items) + "]"


def torch_model(layers, in_shape):
    mods, feat, shape, table, counts = [], None, list(in_shape), [], {}
    for layer in layers:
        op = layer[0]
        k = counts.get(op, 0)
        counts[op] = k + 1
        if op == "flatten":
            mods.append(torch.nn.Flatten())
            shape = [int(np.prod(shape))]
        elif op == "dense":
            bias = len(layer) < 3 or layer[2]
            assert len(shape) == 1, "dense on a non-flat input: add flatten"
            mods.append(torch.nn.Linear(shape[0], layer[1], bias=bias))
            table.append(("dense%d.weight" % k, (layer[1], shape[0])))
            if bias:
                table.append(("dense%d.bias" % k, (layer[1],)))
            shape = [layer[1]]
        elif op == "dropout":
            mods.append(torch.nn.Dropout(layer[1]))
        else:
            mods.append({"relu": torch.nn.ReLU, "sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh,
                         "gelu": torch.nn.GELU}[op]())
    return torch.nn.Sequential(*mods), table


def write_input(path, x, y, params, label_smoothing):
    n, in_shape = x.shape[0], list(x.shape[1:])
    with open(path, "wb") as f:
        f.write(b"GRPDIN01")
        f.write(struct.pack("<8i", n, len(in_shape), *(in_shape + [1] * (3 - len(in_shape))), K_STEPS, 0, 0))
        f.write(struct.pack("<d", label_smoothing))
        f.write(struct.pack("<3d", SGD["lr"], SGD["momentum"], SGD["weight_decay"]))
        f.write(struct.pack("<5d", ADAMW["lr"], *ADAMW["betas"], ADAMW["eps"], ADAMW["weight_decay"]))
        f.write(struct.pack("<q", params.size))
        f.write(params.astype("<f4").tobytes())
        f.write(x.astype("<f4").tobytes())
        f.write(y.astype("<i4").tobytes())


def read_output(path):
    buf = open(path, "rb").read()
    assert buf[:8] == b"GRPDOU01", "bad magic in parity_dump output"
    n_t, nt, k = struct.unpack_from("<3q", buf, 8)
    pos, table = 32, []
    for _ in range(n_t):
        name = buf[pos:pos + 192].split(b"\0")[0].decode()
        off, ndim, *shape = struct.unpack_from("<6q", buf, pos + 192)
        table.append((name, off, tuple(shape[:ndim])))
        pos += 192 + 48

    def take(dtype, count):
        nonlocal pos
        a = np.frombuffer(buf, dtype=dtype, count=count, offset=pos)
        pos += a.nbytes
        return a

    out = dict(table=table)
    out["train"], out["eval"] = take("<f8", 2), take("<f8", 2)
    out["grads"] = take("<f4", nt)
    for opt in ("sgd", "adamw"):
        out[opt + "_loss"] = take("<f8", k)
        out[opt + "_params"] = take("<f4", k * nt).reshape(k, nt)
    assert pos == len(buf), "parity_dump output: %d bytes left over" % (len(buf) - pos)
    return out


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, cname, what, ok, detail):
        print("%s  %-28s %-34s %s" % ("PASS" if ok else "FAIL", cname, what, detail))
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def close(self, cname, what, got, want, tol_rel, tol_abs=1e-7):
        """max|got - want| <= tol_rel * max|want| + tol_abs"""
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        tol = tol_rel * (float(np.max(np.abs(want))) if want.size else 0.0) + tol_abs
        self.check(cname, what, diff <= tol and np.all(np.isfinite(got)), "max diff %.3g (tol %.3g)" % (diff, tol))
        return diff


def run_config(rep, dump, device, idx, cfg, tmp):
    cname, layers, in_shape, n, smoothing = cfg
    rng = np.random.default_rng(1234 + idx)
    model, exp_table = torch_model(layers, in_shape)
    n_classes = [l for l in layers if l[0] == "dense"][-1][1]
    train_ok = all(l[1] == 0.0 for l in layers if l[0] == "dropout")

    # weights, in the module order (= gpurun's flat order: layers in order, weight then bias)
    flat = []
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p.shape[1] if p.dim() == 2 else p.shape[0]
            w = rng.uniform(-1.5, 1.5, size=tuple(p.shape)) / np.sqrt(fan_in)
            p.copy_(torch.from_numpy(w.astype(np.float32)))
            flat.append(p.detach().numpy().ravel().copy())
    params0 = np.concatenate(flat).astype(np.float32)
    x = rng.normal(0.0, 1.0, size=(n,) + tuple(in_shape)).astype(np.float32)
    y = rng.integers(0, n_classes, size=n).astype(np.int32)

    fin, fout = os.path.join(tmp, "in%d.bin" % idx), os.path.join(tmp, "out%d.bin" % idx)
    write_input(fin, x, y, params0, smoothing)
    cmd = [dump, yaml_layers(layers), fin, fout, device]
    r = subprocess.run(cmd, capture_output=True, text=True)
    rep.check(cname, "parity_dump runs", r.returncode == 0, "rc %d %s" % (r.returncode, r.stderr.strip()))
    if r.returncode != 0:
        return
    g = read_output(fout)

    # the flat layout
    offs, off = [], 0
    for name, shape in exp_table:
        offs.append((name, off, shape))
        off += int(np.prod(shape))
    rep.check(cname, "parameter table", g["table"] == offs,
              "%d tensors, %d params" % (len(offs), off) if g["table"] == offs else
              "gpurun %s vs expected %s" % (g["table"], offs))
    if g["table"] != offs:
        return

    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    def loss_of(m):
        z = m(xt)
        loss = F.cross_entropy(z, yt, label_smoothing=smoothing)
        return loss, int((z.argmax(1) == yt).sum())

    # eval-mode forward
    model.eval()
    with torch.no_grad():
        el, ec = loss_of(model)
    rep.close(cname, "eval loss", g["eval"][0], el.item(), 1e-5, 0.0)
    rep.check(cname, "eval correct", g["eval"][1] == ec, "gpurun %g torch %d" % (g["eval"][1], ec))
    if not train_ok:
        return

    # one training step: loss and gradients
    model.train()
    model.zero_grad()
    tl, tc = loss_of(model)
    tl.backward()
    rep.close(cname, "train loss", g["train"][0], tl.item(), 1e-5, 0.0)
    rep.check(cname, "train correct", g["train"][1] == tc, "gpurun %g torch %d" % (g["train"][1], tc))
    for (name, o, shape), p in zip(offs, model.parameters()):
        got = g["grads"][o:o + p.numel()].reshape(shape)
        rep.close(cname, "grad " + name, got, p.grad.numpy(), 1e-5)

    # K optimizer steps on the same batch, from the same weights
    for opt_name, make in (("sgd", lambda ps: torch.optim.SGD(ps, nesterov=True, **SGD)),
                           ("adamw", lambda ps: torch.optim.AdamW(ps, **ADAMW))):
        with torch.no_grad():
            for (name, o, shape), p in zip(offs, model.parameters()):
                p.copy_(torch.from_numpy(params0[o:o + p.numel()].reshape(shape)))
        opt = make(list(model.parameters()))
        for k in range(K_STEPS):
            opt.zero_grad()
            loss, _ = loss_of(model)
            loss.backward()
            opt.step()
            rep.close(cname, "%s step %d loss" % (opt_name, k + 1), g[opt_name + "_loss"][k], loss.item(), 1e-5, 0.0)
            worst, worst_name, worst_d, ok = -1.0, "", 0.0, True
            for (name, o, shape), p in zip(offs, model.parameters()):
                want = p.detach().numpy().astype(np.float64)
                got = g[opt_name + "_params"][k, o:o + p.numel()].reshape(shape).astype(np.float64)
                p0 = params0[o:o + p.numel()].reshape(shape).astype(np.float64)
                d = float(np.max(np.abs(got - want)))
                # relative to the weights, and (stricter for AdamW's small steps) to the update
                tol = min(1e-5 * float(np.max(np.abs(want))), 1e-4 * float(np.max(np.abs(want - p0)))) + 1e-7
                ok = ok and d <= tol and bool(np.all(np.isfinite(got)))
                if d / tol > worst:
                    worst, worst_name, worst_d = d / tol, name, d
            rep.check(cname, "%s step %d params" % (opt_name, k + 1), ok,
                      "max diff %.3g (%.2f of tol, %s)" % (worst_d, worst, worst_name))
        moved = float(np.max(np.abs(g[opt_name + "_params"][-1] - params0)))
        rep.check(cname, "%s moved the weights" % opt_name, moved > 1e-4, "max |update| %.3g" % moved)


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: parity_torch.py PATH/TO/parity_dump [DEVICE]", file=sys.stderr)
        return 2
    dump = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) == 3 else os.environ.get("PARITY_DEVICE", "cpu")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float32)
    rep = Report()
    print("torch %s, numpy %s, gpurun device %s" % (torch.__version__, np.__version__, device))
    with tempfile.TemporaryDirectory(prefix="parity_torch.") as tmp:
        for i, cfg in enumerate(CONFIGS):
            run_config(rep, dump, device, i, cfg, tmp)
    print("%d passed, %d failed" % (rep.passed, rep.failed))
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
