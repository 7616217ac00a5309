#!/usr/bin/python3
"""parity_cnn.py — end-to-end training parity of the gpurun binary against PyTorch.

    /usr/bin/python3 tests/parity_cnn.py PATH/TO/gpurun TMPDIR [CASE...]

Each case below is a model section (model.blocks + model.layers) held as Python
data. The script
  1. builds the network in torch.nn from that same description with its own
     interpreter, which applies DESIGN 1.4's naming rules (`name:`, else
     `<op><k>` counting that op's layers of the scope from 0, named ones
     included; `<use>.<layer>` inside a block use, `<use>` = its `name:` or
     `<block><k>`; blocks nest; `input` is the block's input) — so gpurun's
     layer names and its module -> tensor mapping are checked independently;
  2. draws the initial weights with torch's own default init (seeded), then
     redraws every batchnorm's weight, bias, running_mean and running_var so
     that loading them is not a no-op, and writes them to init.h5 in the
     /params/<layer>/<tensor>, /state/<layer>/<tensor> layout of DESIGN 1.6;
  3. writes the samples (normal float32 images, uniform labels, every class
     present) to data.h5 (/train/images [N,C,H,W] float32, /train/labels
     int32): float32 images without normalize or mean/std attributes are
     used as stored; N is batch*steps, or 2.5 batches for `pool`, whose
     steps 3-4 are a second epoch (the partial batch dropped, file order);
  4. writes job.yaml (init_from, shuffle false, workers 1, sgd, log every
     step) and runs `gpurun job.yaml --run-dir DIR --quiet --device cpu`
     (PARITY_DEVICE overrides the device);
  5. runs the same steps in torch (model.train(), F.cross_entropy mean,
     torch.optim.SGD with the same lr/momentum/nesterov/weight_decay) in
     fp32, the reference, and in fp64 from the same start, to measure how far
     fp32 rounding alone moves a result; then compares:
       - the per-step losses of metrics.jsonl: |a-b| <= 1e-4 * |b|;
       - the names of weights.h5's /params and /state against torch's
         parameters and batchnorm buffers (both ways), and their shapes;
       - every final tensor: max|a-b| <= 1e-4 * max(1, max|b|)   ("value");
       - every tensor's change from init.h5 (w0), a - w0 against b - w0:
           ||a-b||_2 <= 1e-4 * ||b-w0||_2 + 4 * ||b-b64||_2 + 1e-7 * sqrt(numel)
         ("update"; b64 = torch's fp64 result). The value bound alone could
         miss a wrong but small term (weight decay, BN momentum, eps) since
         weights are O(0.1-1) and a few SGD steps move them by O(1e-2); the
         update bound asks the same 1e-4 relative of what training changed.
         Some tensors hardly move, or only by rounding: a conv/dense bias
         right before a batchnorm has a gradient that is zero up to rounding,
         so its change is fp32 noise (amplified by the batchnorm). There the
         4 * ||b-b64|| term (fp32's own error, as torch shows it) and the
         1e-7 * sqrt(numel) floor (rounding w0 + update: ~6e-8 * |w|) apply;
         gpurun's own distance to b64 is of the same size as torch's;
       - when the run left a checkpoint (checkpoints/LATEST), the SGD
         momentum buffers of its /optim group against torch's, by the same
         bound with base 0 (this version writes no checkpoints yet).
The table shows, per case, the largest loss difference (relative), value
difference (relative to max(1, max|b|)), and fraction of the update bound used
(its tensor named); PARITY_VERBOSE=1 prints every tensor's numbers.
Prints one table row per case (max differences observed) and exits 1 on any
mismatch. CASE arguments select cases by name.
"""
import copy
import fnmatch
import json
import math
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("h5py", "numpy", "torch")
import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

LOSS_RTOL = 1e-4
VALUE_RTOL = 1e-4
UPDATE_RTOL = 1e-4
UPDATE_FLOOR = 1e-7
NOISE_MULT = 4.0
VERBOSE = bool(os.environ.get("PARITY_VERBOSE"))

# ---------------------------------------------------------------------------
# model descriptions: a layer item is {"op": name, "attrs": {...}, "name":
# ..., "input": name | [names], "repeat": n}; a block is {"args": {...},
# "layers": [items]} and a use of it is an item whose op is the block's name.


def L(op, attrs=None, name=None, input=None, repeat=None):
    item = {"op": op}
    if attrs is not None:
        item["attrs"] = attrs
    if name is not None:
        item["name"] = name
    if input is not None:
        item["input"] = input
    if repeat is not None:
        item["repeat"] = repeat
    return item


# (1) configs/fashion-mnist-cnn.yaml's layers
CNN_LAYERS = [
    L("conv", {"filters": 32, "kernel": 3, "padding": 1}),
    L("batchnorm"),
    L("relu"),
    L("maxpool", {"kernel": 2}),
    L("conv", {"filters": 64, "kernel": 3, "padding": 1}),
    L("batchnorm"),
    L("relu"),
    L("maxpool", {"kernel": 2}),
    L("flatten"),
    L("dense", {"units": 128}),
    L("relu"),
    L("dense", {"units": 10}),
]

# (1b) the same without the conv biases that batchnorm cancels: their gradients are rounding
# noise, which AdamW's normalized step turns into full lr-sized steps of either sign
CNN_NOBIAS_LAYERS = [dict(it, attrs=dict(it["attrs"], bias=False)) if it["op"] == "conv" else it
                     for it in CNN_LAYERS]

# (2) a small ResNet: stem, a stage block nesting an identity basic block, a
# repeated identity block, a projection (1x1 stride 2 conv + bn) block.
RESNET_BLOCKS = {
    "basic": {"args": {"out": 8}, "layers": [
        L("conv", {"filters": "$out", "kernel": 3, "padding": 1, "bias": False}),
        L("batchnorm"),
        L("relu"),
        L("conv", {"filters": "$out", "kernel": 3, "padding": 1, "bias": False}),
        L("batchnorm", {"momentum": 0.2}),
        L("add", {}, input=["input", "batchnorm1"]),
        L("relu"),
    ]},
    "down": {"args": {"out": 16, "stride": 2}, "layers": [
        L("conv", {"filters": "$out", "kernel": 3, "stride": "$stride", "padding": 1, "bias": False}),
        L("batchnorm"),
        L("relu"),
        L("conv", {"filters": "$out", "kernel": 3, "padding": 1, "bias": False}),
        L("batchnorm"),
        L("conv", {"filters": "$out", "kernel": 1, "stride": "$stride", "bias": False}, name="proj", input="input"),
        L("batchnorm", {"eps": 1e-3}, name="proj_bn"),
        L("add", {}, input=["batchnorm1", "proj_bn"]),
        L("relu"),
    ]},
    "stage": {"args": {"out": 8}, "layers": [
        L("basic", {"out": "$out"}),
        L("relu", name="post"),
    ]},
}
RESNET_LAYERS = [
    L("conv", {"filters": 8, "kernel": 3, "padding": 1}),
    L("batchnorm"),
    L("relu"),
    L("stage", {"out": 8}, name="s1"),
    L("basic", {}, repeat=2),
    L("down", {"out": 16}),
    L("global_avgpool"),
    L("flatten"),
    L("dense", {"units": 10}),
]

# (3) grouped and depthwise convs, joined by concat; a 2-D batchnorm after
# the dense layer
GROUPED_LAYERS = [
    L("conv", {"filters": 8, "kernel": 3, "padding": 1}, name="stem"),
    L("relu"),
    L("conv", {"filters": 12, "kernel": 3, "padding": 1, "groups": 2}, name="g2"),
    L("batchnorm"),
    L("relu"),
    L("conv", {"filters": 12, "kernel": 3, "stride": 2, "padding": 1, "groups": 12}, name="dw"),
    L("conv", {"filters": 8, "kernel": 1, "stride": 2, "groups": 4, "bias": False}, input="stem"),
    L("batchnorm"),
    L("concat", {"axis": 1}, input=["dw", "batchnorm1"]),
    L("conv", {"filters": 16, "kernel": 3, "padding": 1, "groups": 4}),
    L("relu"),
    L("global_avgpool"),
    L("flatten"),
    L("dense", {"units": 24}),
    L("batchnorm"),
    L("gelu"),
    L("dense", {"units": 7}),
]

# (4) padded pooling on odd sizes, so windows hang over both edges: maxpool 3/2/1 after tanh
# (negative values: padding must not act as 0), avgpool 3/2/1 with and without
# count_include_pad side by side on the same input, sigmoid/tanh in between
POOL_LAYERS = [
    L("conv", {"filters": 8, "kernel": 3, "padding": 1}),
    L("tanh"),
    L("maxpool", {"kernel": 3, "stride": 2, "padding": 1}),
    L("conv", {"filters": 8, "kernel": 3, "padding": 1}),
    L("sigmoid"),
    L("avgpool", {"kernel": 3, "stride": 2, "padding": 1, "count_include_pad": True}, name="avg_in"),
    L("avgpool", {"kernel": 3, "stride": 2, "padding": 1, "count_include_pad": False}, input="sigmoid0"),
    L("concat", {}, input=["avg_in", "avgpool1"]),
    L("conv", {"filters": 12, "kernel": 1}),
    L("batchnorm"),
    L("tanh"),
    L("maxpool", {"kernel": 3, "stride": 2, "padding": 1}),
    L("avgpool", {"kernel": 2, "stride": 1}),
    L("flatten"),
    L("dense", {"units": 10}),
]

# name, blocks, layers, input [C,H,W], classes, batch, steps, optimizer, samples in the file
# (None: batch*steps; pool's 2.5 batches make steps 3-4 a second epoch over batches 1-2, the
# partial third batch being dropped)
CASES = [
    ("cnn", None, CNN_LAYERS, (1, 28, 28), 10, 16, 5,
     {"lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0}, None),
    ("resnet", RESNET_BLOCKS, RESNET_LAYERS, (3, 16, 16), 10, 12, 5,
     {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, None),
    ("grouped", None, GROUPED_LAYERS, (4, 12, 12), 7, 10, 4,
     {"lr": 0.1, "momentum": 0.8, "nesterov": False, "weight_decay": 0.005}, None),
    ("pool", None, POOL_LAYERS, (3, 13, 13), 10, 8, 4,
     {"lr": 0.2, "momentum": 0.0, "nesterov": False, "weight_decay": 0.01}, 20),
    # parameter groups (train.optimizer.decay and .groups) against torch's param_groups
    ("groups", None, CNN_LAYERS, (1, 12, 12), 10, 8, 4,
     {"lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 0.05, "decay": "matrices",
      "groups": [{"params": "conv0.*", "frozen": True},
                 {"params": "dense1.*", "lr_mult": 0.5},
                 {"params": "batchnorm1.weight", "weight_decay": 0.02}]}, None),
    ("adamw", None, CNN_NOBIAS_LAYERS, (1, 12, 12), 10, 8, 4,
     {"type": "adamw", "lr": 0.003, "weight_decay": 0.1, "decay": "matrices",
      "groups": [{"params": "dense0.weight", "lr_mult": 2.0}]}, None),
]

# ---------------------------------------------------------------------------
# YAML emission (flow style; names and `$args` are plain scalars)

OPS_DEFAULTS = {
    "conv": {"stride": 1, "padding": 0, "groups": 1, "bias": True},
    "batchnorm": {"momentum": 0.1, "eps": 1e-5},
    "maxpool": {"padding": 0},
    "avgpool": {"padding": 0, "count_include_pad": True},
    "dense": {"bias": True},
    "concat": {"axis": 1},
}


def yscalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        if v.replace("_", "").replace("$", "").replace(".", "").replace("/", "").replace("-", "").isalnum():
            return v
        return json.dumps(v)
    raise TypeError(v)


def yflow(v):
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (k, yflow(x)) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yflow(x) for x in v) + "]"
    return yscalar(v)


def yitem(item):
    extra = {k: item[k] for k in ("name", "input", "repeat") if k in item}
    if "attrs" not in item and not extra:
        return item["op"]
    d = {item["op"]: item.get("attrs", {})}
    d.update(extra)
    return yflow(d)


def optimizer_yaml(opt):
    """train.optimizer of a case: sgd unless opt says adamw; decay and groups when given."""
    d = {"type": opt.get("type", "sgd"), "lr": opt["lr"]}
    if d["type"] == "sgd":
        d.update(momentum=opt["momentum"], nesterov=opt["nesterov"])
    d["weight_decay"] = opt["weight_decay"]
    for k in ("decay", "groups"):
        if k in opt:
            d[k] = opt[k]
    return d


def torch_param_groups(net, opt):
    """torch's param_groups for a case: each trainable tensor takes the first of opt's groups
    whose pattern matches its gpurun name (fnmatch, `*` crossing dots), else the optimizer's
    settings, weight decay only on tensors of rank >= 2 under decay: matrices; frozen ones are
    left out (requires_grad off)."""
    groups = []
    for tn, (kind, _k, _a) in net.tensor_names.items():
        if kind != "params":
            continue
        name, t = tn.replace("/", "."), net.tensor(tn)
        wd = 0.0 if opt.get("decay") == "matrices" and t.dim() < 2 else opt["weight_decay"]
        lr, frozen = opt["lr"], False
        for g in opt.get("groups", []):
            if fnmatch.fnmatchcase(name, g["params"]):
                lr *= g.get("lr_mult", 1.0)
                wd = g.get("weight_decay", wd)
                frozen = g.get("frozen", False)
                break
        if frozen:
            t.requires_grad_(False)
        else:
            groups.append({"params": [t], "lr": lr, "weight_decay": wd})
    return groups


def job_yaml(case, data_path, init_path):
    name, blocks, layers, _shape, _classes, batch, steps, opt, _n = case
    out = ["name: parity-%s" % name, "seed: 0", "data:",
           "  train: {path: %s, group: /train}" % json.dumps(data_path),
           "  shuffle: false", "  workers: 1", "model:",
           "  init_from: %s" % json.dumps(init_path)]
    if blocks:
        out.append("  blocks:")
        for bname, b in blocks.items():
            out.append("    %s:" % bname)
            out.append("      args: %s" % yflow(b["args"]))
            out.append("      layers:")
            out += ["        - %s" % yitem(it) for it in b["layers"]]
    out.append("  layers:")
    out += ["    - %s" % yitem(it) for it in layers]
    out += ["train:", "  batch_size: %d" % batch, "  steps: %d" % steps,
            "  optimizer: %s" % yflow(optimizer_yaml(opt)),
            "  loss: {type: softmax_cross_entropy}",
            "log: {every_steps: 1, tensorboard: false}"]
    return "\n".join(out) + "\n"

# ---------------------------------------------------------------------------
# the torch interpreter


def subst(v, args):
    if isinstance(v, str) and v.startswith("$"):
        return args[v[1:]]
    if isinstance(v, dict):
        return {k: subst(x, args) for k, x in v.items()}
    if isinstance(v, list):
        return [subst(x, args) for x in v]
    return v


class Net(nn.Module):
    """Runs a list of instructions (full name, op, attrs, input ids); value 0
    is the model input. Modules are created in layer order, so torch's seeded
    default init draws them in a fixed sequence."""

    def __init__(self, blocks, layers, in_shape):
        super().__init__()
        self.blocks = blocks or {}
        self.mods = nn.ModuleDict()   # key: full name with '.' -> '/'
        self.prog = []                # (full name, op, attrs, [input ids])
        self.vals = [torch.zeros((2,) + tuple(in_shape))]  # probe values, for shapes
        self.tensor_names = {}        # "<layer>/<tensor>" -> (kind, module key, attribute)
        with torch.no_grad():
            self.out_id = self._seq(layers, "", 0)

    # one scope: names (local name -> value id) and counters
    def _seq(self, layers, prefix, input_id):
        names = {}
        counts = {}
        cur = input_id

        def find(n):
            if n in names:
                return names[n]
            if n == "input":
                return input_id
            raise KeyError("no layer '%s%s'" % (prefix, n))

        for item in layers:
            op = item["op"]
            if "input" in item:
                inp = item["input"]
                ins = [find(n) for n in (inp if isinstance(inp, list) else [inp])]
            else:
                ins = [cur]
            for _ in range(item.get("repeat", 1)):
                k = counts.get(op, 0)
                counts[op] = k + 1
                local = item.get("name", "%s%d" % (op, k))
                if op in self.blocks:
                    b = self.blocks[op]
                    args = dict(b["args"])
                    args.update(item.get("attrs", {}))
                    cur = self._seq(subst(b["layers"], args), prefix + local + ".", ins[0])
                else:
                    attrs = dict(OPS_DEFAULTS.get(op, {}))
                    attrs.update(item.get("attrs", {}))
                    cur = self._layer(prefix + local, op, attrs, ins)
                names[local] = cur
                ins = [cur]
        return cur

    def _layer(self, full, op, a, ins):
        x = self.vals[ins[0]]
        key = full.replace(".", "/")
        if op == "conv":
            m = nn.Conv2d(x.shape[1], a["filters"], a["kernel"], stride=a["stride"], padding=a["padding"],
                          groups=a["groups"], bias=a["bias"])
        elif op == "dense":
            m = nn.Linear(x.shape[1], a["units"], bias=a["bias"])
        elif op == "batchnorm":
            cls = nn.BatchNorm2d if x.dim() == 4 else nn.BatchNorm1d
            m = cls(x.shape[1], eps=a["eps"], momentum=a["momentum"])
            # non-trivial values, so loading them is checked
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0.0, 0.2)
            m.running_mean.normal_(0.0, 0.3)
            m.running_var.uniform_(0.5, 2.0)
        else:
            m = None
        if m is not None:
            self.mods[key] = m
            for t, _ in m.named_parameters():
                self.tensor_names[full + "/" + t] = ("params", key, t)
            if op == "batchnorm":
                self.tensor_names[full + "/running_mean"] = ("state", key, "running_mean")
                self.tensor_names[full + "/running_var"] = ("state", key, "running_var")
        self.prog.append((full, op, a, list(ins)))
        if m is not None:
            m.eval()
        y = self._run_op(key, op, a, [self.vals[i] for i in ins])
        if m is not None:
            m.train()
        self.vals.append(y)
        return len(self.vals) - 1

    def _run_op(self, key, op, a, xs):
        x = xs[0]
        if op in ("conv", "dense", "batchnorm"):
            return self.mods[key](x)
        if op == "relu":
            return F.relu(x)
        if op == "sigmoid":
            return torch.sigmoid(x)
        if op == "tanh":
            return torch.tanh(x)
        if op == "gelu":
            return F.gelu(x)
        if op == "maxpool":
            return F.max_pool2d(x, a["kernel"], a.get("stride", a["kernel"]), a["padding"])
        if op == "avgpool":
            return F.avg_pool2d(x, a["kernel"], a.get("stride", a["kernel"]), a["padding"],
                                count_include_pad=a["count_include_pad"])
        if op == "global_avgpool":
            return x.mean(dim=(2, 3), keepdim=True)
        if op == "flatten":
            return x.flatten(1)
        if op == "add":
            y = xs[0]
            for t in xs[1:]:
                y = y + t
            return y
        if op == "concat":
            return torch.cat(xs, dim=a["axis"])
        raise ValueError("op %s" % op)

    def tensor(self, tn):
        _kind, key, attr = self.tensor_names[tn]
        return getattr(self.mods[key], attr)

    def arrays(self):
        """{(kind, "<layer>/<tensor>"): float64 numpy array}"""
        return {(kind, tn): self.tensor(tn).detach().numpy().astype(np.float64)
                for tn, (kind, _k, _a) in self.tensor_names.items()}

    def forward(self, x):
        vals = [x]
        for full, op, a, ins in self.prog:
            vals.append(self._run_op(full.replace(".", "/"), op, a, [vals[i] for i in ins]))
        return vals[self.out_id]

# ---------------------------------------------------------------------------


def read_group(f, top):
    out = {}
    if top not in f:
        return out

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]
    f[top].visititems(visit)
    return out


def near(what, a, b, c, base, fails):
    """gpurun's a against torch's fp32 b, as changes from base: ||a-b|| <=
    UPDATE_RTOL*||b-base|| + NOISE_MULT*||b-c|| + UPDATE_FLOOR*sqrt(n), c
    being torch's fp64 result. Returns the fraction of the bound used."""
    diff = float(np.linalg.norm(a - b))
    change = float(np.linalg.norm(b - base))
    noise = float(np.linalg.norm(b - c))
    bound = UPDATE_RTOL * change + NOISE_MULT * noise + UPDATE_FLOOR * math.sqrt(b.size)
    if VERBOSE:
        print("    %-40s diff %.2e change %.2e fp32 noise %.2e  gpurun-fp64 %.2e  used %.3f"
              % (what, diff, change, noise, float(np.linalg.norm(a - c)), diff / bound))
    if not diff <= bound:
        fails.append("%s: ||gpurun - torch|| %.3e > bound %.3e (||torch change|| %.3e, torch fp32-fp64 %.3e)"
                     % (what, diff, bound, change, noise))
    return diff / bound


def check_momentum(net, sgd, net64, sgd64, latest, steps, fails):
    """Compares /optim/<layer>/<tensor>/<slot> of the checkpoint LATEST names
    with torch's momentum buffers (by near(), base 0); returns the largest
    fraction of the bound used."""
    worst = 0.0
    with open(latest) as fl:
        ck = os.path.join(os.path.dirname(latest), fl.read().strip())
    with h5py.File(ck, "r") as f:
        if int(f.attrs["step"]) != steps:
            fails.append("%s: step %s, expected %d" % (ck, f.attrs["step"], steps))
        optim = read_group(f, "optim")
    for tn, (kind, _k, _a) in net.tensor_names.items():
        if kind != "params":
            continue
        what = "checkpoint /optim/%s" % tn
        slots = {k: v for k, v in optim.items() if k.rsplit("/", 1)[0] == tn}
        if len(slots) != 1:
            fails.append("%s: slots %s, expected one momentum buffer" % (what, sorted(slots)))
            continue
        a = next(iter(slots.values())).astype(np.float64)
        if not net.tensor(tn).requires_grad:  # frozen: never updated, its buffer stays zero
            if np.any(a != 0):
                fails.append("%s: a frozen tensor's momentum buffer is not zero" % what)
            continue
        b = sgd.state[net.tensor(tn)]["momentum_buffer"].numpy().astype(np.float64)
        c = sgd64.state[net64.tensor(tn)]["momentum_buffer"].numpy()
        if a.shape != b.shape:
            fails.append("%s: shape %s, torch %s" % (what, a.shape, b.shape))
            continue
        worst = max(worst, near(what, a, b, c, 0.0, fails))
    return worst


def write_init(net, path):
    """net's tensors as init.h5 (/params, /state); returns them in float64 by name"""
    w0 = {}
    with h5py.File(path, "w") as f:
        for tn, (kind, _k, _a) in net.tensor_names.items():
            arr = net.tensor(tn).detach().numpy().astype(np.float32)
            w0[tn] = arr.astype(np.float64)
            f.create_dataset("%s/%s" % (kind, tn), data=arr)
    return w0


def write_train(path, images, labels):
    """a data file of one split, /train: images as given (uint8 or float32), int32 labels"""
    with h5py.File(path, "w") as f:
        g = f.create_group("train")
        g.create_dataset("images", data=images)
        g.create_dataset("labels", data=labels)


def train_torch(net, images, labels, batch, steps, opt):
    dtype = next(net.parameters()).dtype
    groups = torch_param_groups(net, opt)
    if opt.get("type", "sgd") == "adamw":
        sgd = torch.optim.AdamW(groups, lr=opt["lr"], betas=(0.9, 0.999), eps=1e-8)
    else:
        sgd = torch.optim.SGD(groups, lr=opt["lr"], momentum=opt["momentum"], nesterov=opt["nesterov"])
    net.train()
    losses = []
    X = torch.from_numpy(images).to(dtype)
    Y = torch.from_numpy(labels.astype(np.int64))
    per_epoch = len(labels) // batch  # an epoch's partial last batch is dropped
    for s in range(steps):
        i = s % per_epoch
        xb, yb = X[i * batch:(i + 1) * batch], Y[i * batch:(i + 1) * batch]
        loss = F.cross_entropy(net(xb), yb)
        losses.append(loss.item())
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    return losses, sgd


def run_case(case, gpurun, tmp, device):
    name, blocks, layers, in_shape, classes, batch, steps, opt, n = case
    d = os.path.join(tmp, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    fails = []
    seed = sum(ord(c) for c in name)
    torch.manual_seed(seed)
    net = Net(blocks, layers, in_shape)
    assert net.vals[net.out_id].shape == (2, classes), (name, net.vals[net.out_id].shape)

    # initial weights
    init_path = os.path.join(d, "init.h5")
    w0 = write_init(net, init_path)
    # data
    rng = np.random.default_rng(seed)
    n = n or batch * steps
    images = rng.standard_normal((n,) + tuple(in_shape)).astype(np.float32)
    labels = rng.integers(0, classes, size=n).astype(np.int32)
    labels[:classes] = np.arange(classes)  # every class present: the classifier's width is checked
    data_path = os.path.join(d, "data.h5")
    write_train(data_path, images, labels)
    job = os.path.join(d, "job.yaml")
    with open(job, "w") as f:
        f.write(job_yaml(case, data_path, init_path))

    # gpurun
    run_dir = os.path.join(d, "run")
    t0 = time.time()
    r = subprocess.run([gpurun, job, "--run-dir", run_dir, "--quiet", "--device", device],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    t_gr = time.time() - t0
    if r.returncode != 0:
        return {"fails": ["gpurun exited %d:\n%s" % (r.returncode, r.stdout)], "t": t_gr}
    gr_loss = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if m.get("kind") == "train":
                gr_loss[m["step"]] = m["loss"]

    # torch, in fp32 (the reference) and in fp64 (to measure fp32's own rounding)
    net64 = copy.deepcopy(net).double()
    th_loss, sgd = train_torch(net, images, labels, batch, steps, opt)
    _loss64, sgd64 = train_torch(net64, images, labels, batch, steps, opt)

    # losses; gpurun's step S is the S-th optimizer step (1-based)
    steps_seen = sorted(gr_loss)
    if steps_seen != list(range(1, steps + 1)):
        fails.append("metrics.jsonl train steps %s, expected 1..%d" % (steps_seen, steps))
    max_loss_rel = 0.0
    for s in range(steps):
        a = gr_loss.get(s + 1)
        if a is None:
            continue
        b = th_loss[s]
        rel = abs(a - b) / abs(b)
        max_loss_rel = max(max_loss_rel, rel)
        if not rel <= LOSS_RTOL:
            fails.append("step %d loss %.9g, torch %.9g (rel %.2e)" % (s + 1, a, b, rel))

    # weights.h5: names, shapes, values, updates
    with h5py.File(os.path.join(run_dir, "weights.h5"), "r") as f:
        got = {("params", k): v for k, v in read_group(f, "params").items()}
        got.update({("state", k): v for k, v in read_group(f, "state").items()})
    want, want64 = net.arrays(), net64.arrays()
    for k in sorted(set(want) - set(got)):
        fails.append("weights.h5 lacks /%s/%s" % k)
    for k in sorted(set(got) - set(want)):
        fails.append("weights.h5 has /%s/%s, which torch's model does not" % k)
    max_val = 0.0
    max_upd = 0.0
    worst = ""
    for k in sorted(set(want) & set(got)):
        a, b = got[k], want[k]
        what = "/%s/%s" % k
        if a.shape != b.shape:
            fails.append("%s: shape %s, torch %s" % (what, a.shape, b.shape))
            continue
        if a.dtype != np.float32:
            fails.append("%s: dtype %s" % (what, a.dtype))
        a = a.astype(np.float64)
        diff = float(np.max(np.abs(a - b)))
        scale = max(1.0, float(np.max(np.abs(b))))
        max_val = max(max_val, diff / scale)
        if not diff <= VALUE_RTOL * scale:
            fails.append("%s: max|diff| %.3e > %.1e * %.3g" % (what, diff, VALUE_RTOL, scale))
        used = near(what + " update", a, b, want64[k], w0[k[1]], fails)
        if used > max_upd:
            max_upd, worst = used, what
    # the last checkpoint's momentum buffers, when gpurun wrote one
    max_mom = None
    latest = os.path.join(run_dir, "checkpoints", "LATEST")
    if opt.get("momentum", 0) > 0 and os.path.exists(latest):
        max_mom = check_momentum(net, sgd, net64, sgd64, latest, steps, fails)
    return {"fails": fails, "t": t_gr, "loss": max_loss_rel, "val": max_val, "upd": max_upd,
            "worst": worst, "mom": max_mom, "n": len(want), "losses": th_loss}


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: parity_cnn.py PATH/TO/gpurun TMPDIR [CASE...]")
    gpurun, tmp = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = sys.argv[3:]
    device = os.environ.get("PARITY_DEVICE", "cpu")
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(tmp, exist_ok=True)
    unknown = [c for c in only if c not in [case[0] for case in CASES]]
    if unknown:
        sys.exit("unknown case(s) %s; cases: %s" % (unknown, [case[0] for case in CASES]))
    nfail = 0
    print("%-8s %7s %10s %10s %10s %10s  %-28s %s" % ("case", "tensors", "loss rel", "value rel",
                                                       "upd bound", "momentum", "worst update", "gpurun s"))
    for case in CASES:
        if only and case[0] not in only:
            continue
        try:
            r = run_case(case, gpurun, tmp, device)
        except Exception as e:  # a missing file or dataset: that case fails, the others still run
            r = {"fails": ["%s: %s" % (type(e).__name__, e)]}
        if "loss" in r:
            mom = "%10.2e" % r["mom"] if r["mom"] is not None else "%10s" % "n/a"
            print("%-8s %7d %10.2e %10.2e %10.2e %s  %-28s %.2f" % (
                case[0], r["n"], r["loss"], r["val"], r["upd"], mom, r["worst"], r["t"]))
        else:
            print("%-8s  failed before comparing" % case[0])
        for msg in r["fails"]:
            print("  FAIL %s: %s" % (case[0], msg))
        nfail += len(r["fails"]) > 0
    print("%d case(s) failed" % nfail if nfail else "all cases passed (device %s)" % device)
    sys.exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
