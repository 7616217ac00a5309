#!/usr/bin/python3
"""parity_gpt.py — a GPT (nanoGPT's model: token and learned position
embeddings, pre-norm blocks of causal self-attention and a tanh-GELU MLP, a
final layernorm, a head tied to the token embedding or not) in gpurun against
the same model written here in PyTorch, on the same weights and tokens.

    /usr/bin/python3 tests/parity_gpt.py PATH/TO/parity_dump [DEVICE]

For each model below it draws weights and tokens with numpy (fixed seed),
runs tests/tools/parity_dump in its token mode (gpurun's graph -> autodiff ->
plan -> kernels -> optimizer), and checks against PyTorch in float64:
  - the logits of an eval forward: max|diff| <= 1e-5 * max|logit|;
  - the mean per-token loss (the padded vocabulary left out, as
    train.loss.classes does): relative 1e-5;
  - every parameter's gradient: max|diff| <= 1e-4 * max|grad| + 1e-9;
  - the losses before each of 10 AdamW steps: relative 1e-5;
and causality: tokens changed after position t leave gpurun's logits at
positions <= t bit for bit unchanged. The models cover T = 1, T not a
multiple of the CPU kernel's tiles (32 queries, 64 keys), one head, tied and
untied heads, a vocabulary padded past its real size. Prints one line per
check and "N passed, M failed"; exits 1 on a failure.
"""
import math
import os
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

K_STEPS = 10
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
SGD = (0.05, 0.9, 0.0)
NAME_LEN = 192

# name, layers, heads, width, T (positions run), max_len, vocab (real), padded vocab, tied, batch
MODELS = [
    ("2 layers, 2 heads, T=37, tied, padded vocab", 2, 2, 16, 37, 40, 29, 32, True, 3),
    ("1 layer, 1 head, T=70, untied", 1, 1, 12, 70, 70, 20, 20, False, 2),
    ("T=1", 2, 2, 8, 1, 4, 11, 16, True, 4),
    ("3 layers, 4 heads, T=16, untied, padded", 3, 4, 32, 16, 16, 50, 64, False, 2),
]


def layers_yaml(n_layer, heads, c, max_len, vp, tied):
    items = [f"{{embedding: {{vocab: {vp}, dim: {c}}}, name: wte}}",
             f"{{pos_embedding: {{max_len: {max_len}}}, name: wpe}}"]
    res = "wpe"
    for i in range(n_layer):
        h = f"h{i}_"
        items += [f"{{layernorm: {{}}, name: {h}ln_1, input: {res}}}",
                  f"{{dense: {{units: {3 * c}}}, name: {h}c_attn}}",
                  f"{{attention: {{heads: {heads}}}, name: {h}attn}}",
                  f"{{dense: {{units: {c}}}, name: {h}c_proj}}",
                  f"{{add: {{}}, input: [{res}, {h}c_proj], name: {h}res1}}",
                  f"{{layernorm: {{}}, name: {h}ln_2}}",
                  f"{{dense: {{units: {4 * c}}}, name: {h}c_fc}}",
                  "gelu_tanh",
                  f"{{dense: {{units: {c}}}, name: {h}mlp_proj}}",
                  f"{{add: {{}}, input: [{h}res1, {h}mlp_proj], name: {h}res2}}"]
        res = f"{h}res2"
    items.append("{layernorm: {}, name: ln_f}")
    items.append(f"{{dense: {{units: {vp}, bias: false{', tied: wte' if tied else ''}}}, name: lm_head}}")
    return "[" + ", ".join(items) + "]"


def torch_forward(p, tok, n_layer, heads, c, tied):
    """nanoGPT's forward in float64 on parameters p (name -> tensor)."""
    n, t = tok.shape
    x = p["wte.weight"][tok] + p["wpe.weight"][:t]
    d = c // heads
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    for i in range(n_layer):
        h = f"h{i}_"
        a = F.layer_norm(x, (c,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "c_attn.weight"].T + p[h + "c_attn.bias"]
        q, k, v = qkv.split(c, dim=2)
        q, k, v = (z.view(n, t, heads, d).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(n, t, c)
        x = x + y @ p[h + "c_proj.weight"].T + p[h + "c_proj.bias"]
        m = F.layer_norm(x, (c,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "c_fc.weight"].T + p[h + "c_fc.bias"], approximate="tanh")
        x = x + m @ p[h + "mlp_proj.weight"].T + p[h + "mlp_proj.bias"]
    x = F.layer_norm(x, (c,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ (p["wte.weight"] if tied else p["lm_head.weight"]).T


def torch_loss(logits, tgt, vocab):
    return F.cross_entropy(logits[..., :vocab].reshape(-1, vocab), tgt.reshape(-1))


def run_dump(dump, device, layers, params, x, y, t, vocab, n):
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(fin, "wb") as f:
            f.write(b"GRPDIN02")
            f.write(struct.pack("<8i", n, 1, t, 0, 0, K_STEPS, 0, 0))
            f.write(struct.pack("<2iq", t, 0, vocab))
            f.write(struct.pack("<d", 0.0))
            f.write(struct.pack("<3d", *SGD))
            f.write(struct.pack("<5d", ADAMW["lr"], *ADAMW["betas"], ADAMW["eps"], ADAMW["weight_decay"]))
            f.write(struct.pack("<q", params.size))
            f.write(params.astype("<f4").tobytes())
            f.write(x.astype("<i4").tobytes())
            f.write(y.astype("<i4").tobytes())
        r = subprocess.run([dump, layers, fin, fout, device], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"parity_dump failed ({r.returncode}): {r.stderr.strip()}")
        return open(fout, "rb").read()


def parse_out(buf, n, t, vp):
    assert buf[:8] == b"GRPDOU01", "bad output magic"
    n_pt, nw, k = struct.unpack_from("<3q", buf, 8)
    at = 32
    table = []
    for _ in range(n_pt):
        name = buf[at:at + NAME_LEN].split(b"\0")[0].decode()
        off, ndim, *shape = struct.unpack_from("<6q", buf, at + NAME_LEN)
        table.append((name, off, tuple(shape[:ndim])))
        at += NAME_LEN + 48
    stats = struct.unpack_from("<4d", buf, at)
    at += 32
    logits = np.frombuffer(buf, "<f4", n * t * vp, at).reshape(n, t, vp)
    at += 4 * n * t * vp
    grads = np.frombuffer(buf, "<f4", nw, at)
    at += 4 * nw
    out = {"table": table, "stats": stats, "logits": logits, "grads": grads}
    for opt in ("sgd", "adamw"):
        out[opt + "_loss"] = np.frombuffer(buf, "<f8", k, at)
        at += 8 * k + 4 * k * nw
    return out


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def max_rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def one_model(dump, device, cfg, ck):
    name, n_layer, heads, c, t, max_len, vocab, vp, tied, n = cfg
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    layers = layers_yaml(n_layer, heads, c, max_len, vp, tied)
    x = rng.integers(0, vocab, size=(n, t))
    y = rng.integers(0, vocab, size=(n, t))
    # the parameter table first (weights 0), then real weights in its order
    probe = parse_out(run_dump(dump, device, layers, np.zeros(count_params(n_layer, c, max_len, vp, tied), np.float32),
                               x, y, t, vocab, n), n, t, vp)
    params = np.zeros(sum(int(np.prod(s)) for _, _, s in probe["table"]), np.float32)
    tp = {}
    for pname, off, shape in probe["table"]:
        size = int(np.prod(shape))
        if pname.endswith("ln_1.weight") or pname.endswith("ln_2.weight") or pname == "ln_f.weight":
            w = 1.0 + 0.1 * rng.standard_normal(size)
        else:
            w = 0.2 * rng.standard_normal(size)
        params[off:off + size] = w
        tp[pname] = torch.tensor(w.reshape(shape), dtype=torch.float64, requires_grad=True)
    out = parse_out(run_dump(dump, device, layers, params, x, y, t, vocab, n), n, t, vp)
    tok, tgt = torch.tensor(x), torch.tensor(y)
    logits = torch_forward(tp, tok, n_layer, heads, c, tied)
    loss = torch_loss(logits, tgt, vocab)
    loss.backward()
    e = max_rel(out["logits"], logits.detach().numpy())
    ck.check(e <= 1e-5, f"{name}: logits rel. error {e:.2e}")
    for label, got in (("train", out["stats"][0]), ("eval", out["stats"][2])):
        e = abs(got - loss.item()) / abs(loss.item())
        ck.check(e <= 1e-5, f"{name}: {label} loss {got:.8f} vs torch {loss.item():.8f} (rel {e:.1e})")
    worst, at = 0.0, ""
    for pname, off, shape in out["table"]:
        g = out["grads"][off:off + int(np.prod(shape))].reshape(shape)
        want = tp[pname].grad.numpy()
        err = float(np.max(np.abs(g - want))) / (float(np.max(np.abs(want))) + 1e-9)
        if err > worst:
            worst, at = err, pname
    ck.check(worst <= 1e-4, f"{name}: every gradient within 1e-4 (worst {worst:.2e} at {at})")
    # 10 AdamW steps on the same batch
    tq = {k: v.detach().clone().requires_grad_(True) for k, v in tp.items()}
    opt = torch.optim.AdamW(list(tq.values()), **ADAMW)
    losses = []
    for _ in range(K_STEPS):
        opt.zero_grad()
        lo = torch_loss(torch_forward(tq, tok, n_layer, heads, c, tied), tgt, vocab)
        losses.append(lo.item())
        lo.backward()
        opt.step()
    e = max(abs(a - b) / abs(b) for a, b in zip(out["adamw_loss"], losses))
    ck.check(e <= 1e-5, f"{name}: {K_STEPS} AdamW steps' losses within {e:.1e} relative "
             f"({losses[0]:.5f} -> {losses[-1]:.5f})")
    # causality: tokens after position p changed leave the logits up to p bit for bit
    if t > 2:
        p = t // 2
        x2 = x.copy()
        x2[:, p + 1:] = (x2[:, p + 1:] + 1 + rng.integers(0, vocab - 1, size=x2[:, p + 1:].shape)) % vocab
        out2 = parse_out(run_dump(dump, device, layers, params, x2, y, t, vocab, n), n, t, vp)
        same = np.array_equal(out2["logits"][:, :p + 1].view(np.uint32), out["logits"][:, :p + 1].view(np.uint32))
        moved = not np.array_equal(out2["logits"][:, p + 1:], out["logits"][:, p + 1:])
        ck.check(same and moved, f"{name}: tokens changed after position {p}: logits up to it bit for bit the "
                 f"same ({same}), later ones changed ({moved})")


def count_params(n_layer, c, max_len, vp, tied):
    block = 2 * c + 3 * c * c + 3 * c + c * c + c + 2 * c + 4 * c * c + 4 * c + 4 * c * c + c
    return vp * c + max_len * c + n_layer * block + 2 * c + (0 if tied else vp * c)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    dump = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("PARITY_DEVICE", "cpu")
    torch.manual_seed(0)
    ck = Checks()
    for cfg in MODELS:
        one_model(dump, device, cfg, ck)
    print(f"{ck.passed} passed, {ck.failed} failed")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
