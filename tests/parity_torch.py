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
masks are gpurun's own RNG stream). Models need not be a chain: a layer may
name itself and read named layers (the shape and join models below: reshape,
permute, slice, split into named parts,
broadcast add and mul, concat along the last axis). Prints one line per check and ends with
"N passed, M failed"; exits 1 on any failure. DEVICE (default cpu, or the
PARITY_DEVICE environment variable) is passed to parity_dump.
"""
import functools
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
# ("reshape", [per-sample shape]) ("permute", [axes]) ("slice", axis, start, end)
# ("split", axis, [sizes], [names]) (gpurun's split item; torch.split)
# ("add", [names]) ("mul", [a, b]) ("concat", axis, [names]) ("layernorm", eps, bias)
# (F.layer_norm over the last axis) ("gelu_tanh",); a layer may end
# in {"name": ..., "input": ...} (its `name:` and its one `input:`).
CONFIGS = [
    ("mlp relu/gelu", [("flatten",), ("dense", 32), ("relu",), ("dense", 16), ("gelu",), ("dense", 10)],
     (1, 8, 8), 16, 0.0),
    ("sigmoid/tanh smoothing 0.1", [("dense", 24), ("sigmoid",), ("dense", 20), ("tanh",), ("dense", 7)],
     (12,), 12, 0.1),
    ("no-bias + dropout 0", [("flatten",), ("dense", 20, False), ("dropout", 0.0), ("tanh",), ("gelu",),
                             ("dense", 5)], (2, 3, 4), 9, 0.0),
    ("dropout 0.5 (eval)", [("flatten",), ("dense", 16), ("relu",), ("dropout", 0.5), ("dense", 6)],
     (3, 5), 10, 0.05),
    ("reshape/permute/slice/split/mul/concat", [
        ("dense", 24), ("reshape", [2, 3, 4]), ("permute", [0, 3, 1, 2]),
        ("slice", 1, 0, 2, {"name": "a"}), ("slice", -3, 2, 4, {"input": "permute0", "name": "b"}),
        ("mul", ["a", "b"]), ("tanh",), ("concat", -1, ["tanh0", "a"]), ("flatten",), ("dense", 5)],
     (7,), 8, 0.0),
    ("split into named parts (torch.split)", [
        ("dense", 12), ("reshape", [3, 4]), ("split", -1, [1, 3], ["p", "q"]), ("dense", 2, {"input": "p"}),
        ("concat", -1, ["dense1", "q"]), ("gelu",), ("split", 1, [2, 1], ["r", "s"]),
        ("mul", ["r", "s"]), ("flatten",), ("dense", 5)],
     (7,), 8, 0.0),
    ("rank-3 and rank-4 dense (the last axis)", [("dense", 6), ("gelu",), ("reshape", [3, 2, 6]), ("dense", 5),
                                                  ("flatten",), ("dense", 4)], (6, 7), 8, 0.0),
    ("GPT-style block: layernorm, gelu_tanh, residual", [
        ("layernorm", 1e-5, True), ("dense", 16), ("gelu_tanh",), ("dense", 8), ("add", ["dense1", "input"]),
        ("layernorm", 1e-3, False), ("flatten",), ("dense", 5)],
     (6, 8), 8, 0.0),
    ("broadcast add/mul", [
        ("dense", 12), ("reshape", [3, 4], {"name": "a"}), ("dense", 4, {"input": "input"}),
        ("reshape", [1, 4], {"name": "b"}), ("dense", 3, {"input": "input"}), ("reshape", [3, 1], {"name": "c"}),
        ("mul", ["a", "b"]), ("add", ["mul0", "c", "b"]), ("sigmoid",), ("flatten",), ("dense", 6)],
     (9,), 10, 0.05),
]


def split_opts(layer):
    """(the layer without its options dict, the dict)"""
    if layer and isinstance(layer[-1], dict):
        return layer[:-1], layer[-1]
    return layer, {}


def flow_list(v):
    return "[" + ", ".join(str(int(a)) for a in v) + "]"


def yaml_layers(layers):
    items = []
    for layer in layers:
        layer, opts = split_opts(layer)
        op, extra = layer[0], ""
        if op == "dense":
            bias = "" if len(layer) < 3 or layer[2] else ", bias: false"
            item = "dense: {units: %d%s}" % (layer[1], bias)
        elif op == "dropout":
            item = "dropout: {rate: %r}" % layer[1]
        elif op == "reshape":
            item = "reshape: {shape: %s}" % flow_list(layer[1])
        elif op == "permute":
            item = "permute: {axes: %s}" % flow_list(layer[1])
        elif op == "slice":
            item = "slice: {axis: %d, start: %d, end: %d}" % layer[1:4]
        elif op == "split":
            item = "split: {axis: %d, sizes: %s, names: [%s]}" % (layer[1], flow_list(layer[2]), ", ".join(layer[3]))
        elif op in ("add", "mul"):
            item, extra = "%s: {}" % op, ", input: [%s]" % ", ".join(layer[1])
        elif op == "concat":
            item, extra = "concat: {axis: %d}" % layer[1], ", input: [%s]" % ", ".join(layer[2])
        elif op == "layernorm":
            item = "layernorm: {eps: %r, bias: %s}" % (layer[1], "true" if layer[2] else "false")
        else:
            item = "%s: {}" % op
        if "name" in opts:
            extra += ", name: %s" % opts["name"]
        if "input" in opts:
            extra += ", input: %s" % opts["input"]
        items.append(op if item == "%s: {}" % op and not extra else "{%s%s}" % (item, extra))
    return "[" + ", ".join(items) + "]"


class LayerNorm(torch.nn.Module):
    """nn.LayerNorm(c, eps) over the last axis, with or without bias (torch 1.13's has no bias=False)"""

    def __init__(self, c, eps, bias):
        super().__init__()
        self.c, self.eps = c, eps
        self.weight = torch.nn.Parameter(torch.ones(c))
        self.bias = torch.nn.Parameter(torch.zeros(c)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, (self.c,), self.weight, self.bias, self.eps)


class Net(torch.nn.Module):
    """The layers in order, each reading the previous layer's output or the
    named ones (gpurun's model.layers semantics); modules in layer order."""

    def __init__(self, steps, mods):
        super().__init__()
        self.mods = torch.nn.ModuleList(mods)
        self.steps = steps  # (name, input names, fn)

    def forward(self, x):
        vals, cur = {"input": x}, "input"
        for name, inputs, fn in self.steps:
            vals[name] = fn(*[vals[i] for i in inputs])
            cur = name
        return vals[cur]


def torch_model(layers, in_shape):
    mods, steps, table, counts = [], [], [], {}
    shapes, cur = {"input": list(in_shape)}, "input"
    for layer in layers:
        layer, opts = split_opts(layer)
        op = layer[0]
        k = counts.get(op, 0)
        counts[op] = k + 1
        name = opts.get("name", "%s%d" % (op, k))
        inputs = [opts.get("input", cur)]
        shape = shapes[inputs[0]]
        if op == "flatten":
            mods.append(torch.nn.Flatten())
            fn = mods[-1]
            shape = [int(np.prod(shape))]
        elif op == "dense":
            bias = len(layer) < 3 or layer[2]
            # nn.Linear on the last axis, as gpurun's dense on [n, ..., F]
            mods.append(torch.nn.Linear(shape[-1], layer[1], bias=bias))
            fn = mods[-1]
            table.append(("dense%d.weight" % k, (layer[1], shape[-1])))
            if bias:
                table.append(("dense%d.bias" % k, (layer[1],)))
            shape = list(shape[:-1]) + [layer[1]]
        elif op == "dropout":
            mods.append(torch.nn.Dropout(layer[1]))
            fn = mods[-1]
        elif op == "layernorm":
            mods.append(LayerNorm(shape[-1], layer[1], layer[2]))
            fn = mods[-1]
            table.append(("layernorm%d.weight" % k, (shape[-1],)))
            if layer[2]:
                table.append(("layernorm%d.bias" % k, (shape[-1],)))
        elif op == "reshape":
            fn = (lambda s: lambda t: t.reshape(t.shape[0], *s))(list(layer[1]))
            shape = list(np.empty(shape).reshape(layer[1]).shape)
        elif op == "permute":
            fn = (lambda a: lambda t: t.permute(*a).contiguous())(list(layer[1]))
            shape = [([0] + shape)[a] for a in layer[1]][1:]
        elif op == "slice":
            axis = layer[1] % (len(shape) + 1)
            fn = (lambda a, s, e: lambda t: t.narrow(a, s, e - s))(axis, layer[2], layer[3])
            shape = list(shape)
            shape[axis - 1] = layer[3] - layer[2]
        elif op == "split":  # torch.split's parts, one named value each; the next layer reads the last
            axis, sizes, names = layer[1] % (len(shape) + 1), list(layer[2]), layer[3]
            for p, part in enumerate(names):
                fn = (lambda a, sz, i: lambda t: torch.split(t, sz, dim=a)[i])(axis, sizes, p)
                steps.append((part, inputs, fn))
                shapes[part] = list(shape)
                shapes[part][axis - 1] = sizes[p]
            cur = names[-1]
            continue
        elif op in ("add", "mul"):
            inputs = list(layer[1])
            fn = (lambda t0, *ts: functools.reduce(lambda u, v: u + v, ts, t0)) if op == "add" else \
                (lambda a, b: a * b)
            shape = list(np.broadcast_shapes(*[tuple(shapes[i]) for i in inputs]))
        elif op == "concat":
            inputs = list(layer[2])
            axis = layer[1] % (len(shape) + 1)
            fn = (lambda a: lambda *ts: torch.cat(ts, dim=a))(axis)
            shape = list(shapes[inputs[0]])
            shape[axis - 1] = sum(shapes[i][axis - 1] for i in inputs)
        else:
            mods.append({"relu": torch.nn.ReLU, "sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh,
                         "gelu": torch.nn.GELU, "gelu_tanh": lambda: torch.nn.GELU(approximate="tanh")}[op]())
            fn = mods[-1]
        steps.append((name, inputs, fn))
        shapes[name], cur = shape, name
    return Net(steps, mods), table


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
