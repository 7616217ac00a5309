#!/usr/bin/python3
"""finetune_torch.py — fine-tuning GPT-2 as people have it: `model.init_from` of a Hugging Face
model.safetensors and of llm.c's gpt2 checkpoint into a GPT-2-shaped job spec (the layers of
configs/gpt2-124m.yaml at a tiny size: 2 layers, 2 heads, C 16, vocabulary 37 padded to 48,
12 positions, train.loss.classes 37), through the gpurun binary, against PyTorch.

    /usr/bin/python3 tests/finetune_torch.py PATH/TO/gpurun TMPDIR

A random GPT-2 is written as GPT2LMHeadModel's safetensors (Conv1D weights transposed, under
"transformer.") and as llm.c's version-3 checkpoint (tests/gpt2_import_torch.py's writers).
gpurun trains 3 steps from each (file order, SGD); the first step's loss is the loss of the
loaded weights on the first 4 windows, which tests/gpt_torch.py's model computes in float64
from the same tensors: they must agree within 1e-5 relative, and both files give the same
losses bit for bit. A file whose width is not the spec's is exit 6 naming the tensor.
Exits 1 on a mismatch, 77 (skipped) without torch, numpy or h5py.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402

need("numpy", "torch", "h5py")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import gpt2_import_torch as gi  # noqa: E402 (its GPT-2 of L, C, NH, V, VP, MAXT and the file writers)
from gpt_torch import GPT  # noqa: E402

T, BATCH = gi.MAXT, 4
SPEC = f"""name: ft
seed: 0
data:
  train: {{path: tok.h5, group: /train}}
  seq_len: {T}
  shuffle: false
model:
  inputs: [tokens]
  targets: [targets]
  init_from: INIT
  blocks:
    h:
      layers:
        - {{layernorm: {{}}, name: ln_1}}
        - {{dense: {{units: {3 * gi.C}}}, name: c_attn}}
        - {{attention: {{heads: {gi.NH}}}, name: attn}}
        - {{dense: {{units: {gi.C}}}, name: c_proj}}
        - {{add: {{}}, input: [input, c_proj], name: res}}
        - {{layernorm: {{}}, name: ln_2}}
        - {{dense: {{units: {4 * gi.C}}}, name: c_fc}}
        - gelu_tanh
        - {{dense: {{units: {gi.C}}}, name: mlp_proj}}
        - {{add: {{}}, input: [res, mlp_proj]}}
  layers:
    - {{embedding: {{vocab: {gi.VP}, dim: {gi.C}}}, name: wte}}
    - {{pos_embedding: {{max_len: {gi.MAXT}}}, name: wpe}}
    - {{h: {{}}, repeat: {gi.L}}}
    - {{layernorm: {{}}, name: ln_f}}
    - {{dense: {{units: {gi.VP}, tied: wte, bias: false}}, name: lm_head}}
train:
  batch_size: {BATCH}
  steps: 3
  optimizer: {{type: sgd, lr: 0.01}}
  loss: {{type: softmax_cross_entropy, classes: {gi.V}}}
  metrics: []
log: {{every_steps: 1}}
checkpoint: {{every_minutes: 0}}
"""


def main():
    gpurun, tmp = sys.argv[1], sys.argv[2]
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    t = {k: 0.3 * v for k, v in gi.model_tensors().items()}  # GPT-2-like scales: finite, distinct logits
    for name in t:
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            t[name] = 1.0 + t[name]
    gi.write_safetensors(os.path.join(tmp, "model.safetensors"), gi.hf_state_dict(t, "transformer."), torch.float32)
    gi.write_llmc(os.path.join(tmp, "gpt2.bin"), t, 3)
    ids = np.random.default_rng(3).integers(0, gi.V, size=2000).astype("<u2")
    ids.tofile(os.path.join(tmp, "tok.bin"))
    r = subprocess.run([gpurun, "data", "tokens", "tok.h5", "--from", "tok.bin", "--vocab-size", str(gi.V)], cwd=tmp,
                       capture_output=True, text=True)
    check(r.returncode == 0, f"data tokens: exit {r.returncode} {r.stderr[-200:]}")

    # torch: the loss of the loaded weights on the first BATCH windows (file order)
    model = GPT(gi.L, gi.NH, gi.C, gi.V, gi.MAXT).double()
    state = {}
    for key in model.state_dict():
        parts = key.split(".")
        ours = ("h" + parts[1] + "." + ".".join(parts[2:])) if parts[0] == "h" else key
        state[key] = t[ours].double()
    model.load_state_dict(state)
    x = torch.tensor(np.stack([ids[i * T:i * T + T] for i in range(BATCH)]).astype(np.int64))
    y = torch.tensor(np.stack([ids[i * T + 1:i * T + T + 1] for i in range(BATCH)]).astype(np.int64))
    with torch.no_grad():
        want = F.cross_entropy(model(x).reshape(-1, gi.V), y.reshape(-1)).item()

    losses = {}
    for fname in ("model.safetensors", "gpt2.bin"):
        spec = os.path.join(tmp, f"ft_{fname}.yaml")
        with open(spec, "w") as f:
            f.write(SPEC.replace("INIT", fname))
        run_dir = os.path.join(tmp, "run_" + fname)
        r = subprocess.run([gpurun, spec, "--quiet", "--threads", "2", "--run-dir", run_dir], cwd=tmp,
                           capture_output=True, text=True)
        check(r.returncode == 0, f"training from {fname}: exit {r.returncode} {r.stderr[-300:]}")
        if r.returncode:
            continue
        lines = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
        losses[fname] = [d["loss"] for d in lines if d.get("kind") == "train"]
        got = losses[fname][0]
        check(abs(got - want) <= 1e-5 * abs(want),
              f"{fname}: the first step's loss {got:.7f} vs torch's {want:.7f} on the same weights")
    if len(losses) == 2:
        a, b = losses.values()
        check(a == b and len(a) == 3, f"both files train alike, bit for bit: {a} {b}")

    # a file of another width than the spec's: exit 6 naming the tensor
    narrow = {k: v for k, v in t.items()}
    narrow["wpe.weight"] = narrow["wpe.weight"][:, :8]
    gi.write_safetensors(os.path.join(tmp, "narrow.safetensors"), gi.hf_state_dict(narrow, ""), torch.float32)
    with open(os.path.join(tmp, "ft_narrow.yaml"), "w") as f:
        f.write(SPEC.replace("INIT", "narrow.safetensors"))
    r = subprocess.run([gpurun, "ft_narrow.yaml", "--quiet", "--run-dir", "run_narrow"], cwd=tmp, capture_output=True,
                       text=True)
    check(r.returncode == 6 and "wpe.weight" in r.stderr and f"[{gi.MAXT}, 8]" in r.stderr,
          f"a narrower file: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    print("FAILED" if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
