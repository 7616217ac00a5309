#!/usr/bin/python3
"""gpt2_import_torch.py — model.init_from of GPT-2 weights against PyTorch.

    /usr/bin/python3 tests/gpt2_import_torch.py PATH/TO/gpt2_import_dump TMPDIR

A random GPT-2 of 2 layers, C 16, vocabulary 37 (the model's wte padded to
48 rows), maxT 12, made as torch tensors in nn.Linear's [out, in] layout,
is written (no `safetensors` package: by hand, with struct and json) as:
  1. a Hugging Face GPT2LMHeadModel state_dict in safetensors, F32: names
     under "transformer.", the Conv1D weights (c_attn, attn.c_proj, c_fc,
     mlp.c_proj) stored transposed [in, out], with lm_head.weight (tied) and
     the causal-mask buffers h.<i>.attn.bias (BOOL) and masked_bias, in a
     shuffled order; then the same without the prefix in F16 and BF16
     (torch's own conversions);
  2. llm.c's gpt2 checkpoint as its train_gpt2.py write_model writes it:
     version 3 (fp32) and 5 (bf16), wte zero-padded to Vp.
tests/tools/gpt2_import_dump loads each into a hand-built GPT-2 graph of
gpurun's names (h<i>.c_attn, h<i>.mlp_proj, ...) and writes weights.h5; every
tensor must equal torch's (converted through the file's dtype, bit for bit),
the wte rows past the file's vocabulary zero. A file whose C differs from the
model's is refused with exit 6 naming the tensor and both shapes.
Exits 1 on any mismatch, 77 (skipped) without torch, numpy or h5py.
"""
import json
import os
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch", "h5py")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

L, C, NH, V, VP, MAXT = 2, 16, 2, 37, 48, 12
CONV1D = ("c_attn.weight", "c_proj.weight", "c_fc.weight", "mlp_proj.weight")
failed = 0


def model_tensors():
    """gpurun's names -> torch tensors in nn.Linear's layout (wte [V, C], unpadded)."""
    g = torch.Generator().manual_seed(1234)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    t = {"wte.weight": r(V, C), "wpe.weight": r(MAXT, C)}
    for i in range(L):
        p = "h%d." % i
        t.update({p + "ln_1.weight": r(C), p + "ln_1.bias": r(C),
                  p + "c_attn.weight": r(3 * C, C), p + "c_attn.bias": r(3 * C),
                  p + "c_proj.weight": r(C, C), p + "c_proj.bias": r(C),
                  p + "ln_2.weight": r(C), p + "ln_2.bias": r(C),
                  p + "c_fc.weight": r(4 * C, C), p + "c_fc.bias": r(4 * C),
                  p + "mlp_proj.weight": r(C, 4 * C), p + "mlp_proj.bias": r(C)})
    t.update({"ln_f.weight": r(C), "ln_f.bias": r(C)})
    return t


def hf_name(ours):
    if not ours.startswith("h") or not ours[1].isdigit():
        return ours
    layer, rest = ours[1:].split(".", 1)
    rest = {"c_attn.weight": "attn.c_attn.weight", "c_attn.bias": "attn.c_attn.bias",
            "c_proj.weight": "attn.c_proj.weight", "c_proj.bias": "attn.c_proj.bias",
            "c_fc.weight": "mlp.c_fc.weight", "c_fc.bias": "mlp.c_fc.bias",
            "mlp_proj.weight": "mlp.c_proj.weight", "mlp_proj.bias": "mlp.c_proj.bias"}.get(rest, rest)
    return "h.%s.%s" % (layer, rest)


def hf_state_dict(t, prefix):
    """GPT2LMHeadModel's state_dict: Conv1D weights [in, out], the mask buffers, the tied head."""
    sd = {}
    for name, v in t.items():
        conv = any(name.endswith(c) for c in CONV1D) and name.startswith("h")
        sd[prefix + hf_name(name)] = v.t().contiguous() if conv else v
    for i in range(L):
        sd[prefix + "h.%d.attn.bias" % i] = torch.tril(torch.ones(MAXT, MAXT, dtype=torch.bool)).view(1, 1, MAXT, MAXT)
        sd[prefix + "h.%d.attn.masked_bias" % i] = torch.tensor(-1e4)
    sd["lm_head.weight"] = t["wte.weight"]
    return sd


ST_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.bool: "BOOL"}


def tensor_bytes(v):
    if v.dtype == torch.bfloat16:
        return v.contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    if v.dtype == torch.bool:
        return v.contiguous().numpy().astype(np.uint8).tobytes()
    return v.contiguous().numpy().astype(v.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, sd, dtype):
    names = list(sd)
    random.Random(7).shuffle(names)
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for n in names:
        v = sd[n] if sd[n].dtype == torch.bool else sd[n].to(dtype)
        b = tensor_bytes(v)
        header[n] = {"dtype": ST_DTYPE[v.dtype], "shape": list(v.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_llmc(path, t, version):
    """llm.c's write_model: the header, then each parameter in its order (wte padded to Vp)."""
    hdr = [0] * 256
    hdr[:8] = [20240326, version, MAXT, V, L, NH, C, VP]
    wte = torch.cat([t["wte.weight"], torch.zeros(VP - V, C)])
    order = [wte, t["wpe.weight"]]
    for suffix in ("ln_1.weight", "ln_1.bias", "c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias",
                   "ln_2.weight", "ln_2.bias", "c_fc.weight", "c_fc.bias", "mlp_proj.weight", "mlp_proj.bias"):
        order.append(torch.stack([t["h%d.%s" % (i, suffix)] for i in range(L)]))
    order += [t["ln_f.weight"], t["ln_f.bias"]]
    dtype = torch.float32 if version == 3 else torch.bfloat16
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *hdr))
        for v in order:
            f.write(tensor_bytes(v.to(dtype)))


def check(what, exe, path, t, dtype, tmp):
    global failed
    out = os.path.join(tmp, os.path.basename(path) + ".h5")
    r = subprocess.run([exe, str(L), str(C), str(VP), str(MAXT), path, out], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        failed += 1
        print("FAIL %s: exit %d: %s" % (what, r.returncode, r.stdout.strip()))
        return
    bad = []
    with h5py.File(out, "r") as f:
        for name, v in t.items():
            layer, tensor = name.rsplit(".", 1)
            want = v.to(dtype).float().numpy()
            if name == "wte.weight":
                want = np.concatenate([want, np.zeros((VP - V, C), np.float32)])
            got = f["/params/%s/%s" % (layer, tensor)][()]
            if got.shape != want.shape or not np.array_equal(got, want):
                bad.append(name)
    if bad:
        failed += 1
        print("FAIL %s: %d tensors differ, first %s" % (what, len(bad), bad[0]))
    else:
        print("ok   %s: %d tensors (%s)" % (what, len(t), r.stdout.strip().replace("\n", "; ")))


def main():
    exe, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    t = model_tensors()
    cases = [("safetensors F32, transformer. prefix", "gpt2_f32.safetensors", "transformer.", torch.float32),
             ("safetensors F16", "gpt2_f16.safetensors", "", torch.float16),
             ("safetensors BF16", "gpt2_bf16.safetensors", "", torch.bfloat16)]
    for what, fname, prefix, dtype in cases:
        path = os.path.join(tmp, fname)
        write_safetensors(path, hf_state_dict(t, prefix), dtype)
        check(what, exe, path, t, dtype, tmp)
    for version, dtype in ((3, torch.float32), (5, torch.bfloat16)):
        path = os.path.join(tmp, "gpt2_v%d.bin" % version)
        write_llmc(path, t, version)
        check("llm.c version %d" % version, exe, path, t, dtype, tmp)

    # a model of another width: exit 6 naming the tensor and both shapes
    global failed
    path = os.path.join(tmp, "gpt2_f32.safetensors")
    r = subprocess.run([exe, str(L), str(C // 2), str(VP), str(MAXT), path, os.path.join(tmp, "no.h5")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    want = "transformer.wte.weight: shape [%d, %d], but the model's wte.weight is [%d, %d]" % (V, C, VP, C // 2)
    if r.returncode != 6 or want not in r.stdout:
        failed += 1
        print("FAIL width mismatch: exit %d: %s (want exit 6 and %r)" % (r.returncode, r.stdout.strip(), want))
    else:
        print("ok   width mismatch: exit 6, %s" % r.stdout.strip())
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
