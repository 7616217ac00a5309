#!/usr/bin/python3
"""generate_torch.py — `gpurun generate` against PyTorch on the same weights.

    /usr/bin/python3 tests/generate_torch.py PATH/TO/gpurun TMPDIR

Makes a byte-token dataset of a repetitive text (`gpurun data text`), trains
a small GPT on it for a few hundred steps with gpurun (so its predictions
are far from ties), loads the run's weights.h5 into tests/gpt_torch.py's
model, and checks:
  1. greedy decoding (--temperature 0) after a prompt, up to the end of
     the position table: gpurun's text equals PyTorch's argmax decoding,
     which recomputes the whole context at every token;
  2. sampling is a pure function of the seed: the same --seed gives the same
     text twice, and another seed another text;
  3. past the position table (prompt + tokens > max_len) the context slides
     and generation goes on: the requested number of bytes comes out;
  4. the errors: no --checkpoint (exit 2), a missing checkpoint (exit 6).
Exits 1 on a mismatch, 77 (skipped) without torch, numpy or h5py.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402

need("h5py", "numpy", "torch")
import torch  # noqa: E402

from gpt_torch import GPT, load_gpurun  # noqa: E402

LAYERS, HEADS, WIDTH, POSITIONS = 2, 2, 32, 48
SPEC = f"""name: gen
seed: 1
data:
  train: {{path: text.h5, group: /train}}
  seq_len: {POSITIONS}
  shuffle: true
model:
  inputs: [tokens]
  targets: [targets]
  blocks:
    h:
      layers:
        - {{layernorm: {{}}, name: ln_1}}
        - {{dense: {{units: {3 * WIDTH}}}, name: c_attn}}
        - {{attention: {{heads: {HEADS}}}, name: attn}}
        - {{dense: {{units: {WIDTH}}}, name: c_proj}}
        - {{add: {{}}, input: [input, c_proj], name: res}}
        - {{layernorm: {{}}, name: ln_2}}
        - {{dense: {{units: {4 * WIDTH}}}, name: c_fc}}
        - gelu_tanh
        - {{dense: {{units: {WIDTH}}}, name: mlp_proj}}
        - {{add: {{}}, input: [res, mlp_proj]}}
  layers:
    - {{embedding: {{vocab: 256, dim: {WIDTH}, init_std: 0.02}}, name: wte}}
    - {{pos_embedding: {{max_len: {POSITIONS}, init_std: 0.02}}, name: wpe}}
    - {{h: {{}}, repeat: {LAYERS}}}
    - {{layernorm: {{}}, name: ln_f}}
    - {{dense: {{units: 256, tied: wte, bias: false}}, name: lm_head}}
train:
  batch_size: 16
  steps: 300
  optimizer: {{type: adamw, lr: 3.0e-3, weight_decay: 0.0}}
  metrics: []
log: {{every_steps: 100}}
checkpoint: {{every_minutes: 0}}
"""
TEXT = "".join(f"{w} the {w} of gpurun, a runner of jobs; {n} jobs ran.\n"
               for n, w in zip(range(400), ["spring", "summer", "autumn", "winter"] * 100))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=False, **kw)


def main():
    gpurun, tmp = sys.argv[1], sys.argv[2]
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(os.path.join(tmp, "text.txt"), "w") as f:
        f.write(TEXT)
    spec = os.path.join(tmp, "gen.yaml")
    with open(spec, "w") as f:
        f.write(SPEC)
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    r = run([gpurun, "data", "text", "text.h5", "--from", "text.txt", "--val-fraction", "0"], cwd=tmp)
    check(r.returncode == 0, f"data text: exit {r.returncode} {r.stderr.decode()[-300:]}")
    r = run([gpurun, "gen.yaml", "--quiet", "--threads", "2"], cwd=tmp)
    check(r.returncode == 0, f"training: exit {r.returncode} {r.stderr.decode()[-300:]}")
    weights = os.path.join(tmp, "runs", "gen", "weights.h5")
    if failed:
        return 1
    model = load_gpurun(GPT(LAYERS, HEADS, WIDTH, 256, POSITIONS).double(), weights)
    model.eval()

    prompt = "summer the summer of "
    n = POSITIONS - len(prompt)  # within the position table: no slide
    gen = [gpurun, "generate", "gen.yaml", "--checkpoint", weights, "--threads", "2"]
    r = run(gen + ["--prompt", prompt, "--tokens", str(n), "--temperature", "0"], cwd=tmp)
    check(r.returncode == 0, f"generate greedy: exit {r.returncode} {r.stderr.decode()[-300:]}")
    ours = r.stdout
    ids = list(prompt.encode())
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))[0, -1]
            ids.append(int(torch.argmax(logits)))
    want = bytes(ids) + b"\n"
    check(ours == want, f"greedy decoding of {n} tokens: gpurun {ours!r} vs torch {want!r}")

    same = [run(gen + ["--prompt", prompt, "--tokens", "30", "--seed", s], cwd=tmp).stdout for s in ("5", "5", "6")]
    check(same[0] == same[1] and same[0] != same[2] and len(same[0]) == len(prompt) + 31,
          f"sampling: seed 5 twice {same[0]!r} {same[1]!r}, seed 6 {same[2]!r}")

    r = run(gen + ["--prompt", prompt, "--tokens", "100", "--seed", "2"], cwd=tmp)
    check(r.returncode == 0 and len(r.stdout) == len(prompt) + 101,
          f"past the position table ({len(prompt)} + 100 > {POSITIONS}): exit {r.returncode}, {len(r.stdout)} bytes")

    r = run([gpurun, "generate", "gen.yaml", "--prompt", "x"], cwd=tmp)
    check(r.returncode == 2 and b"--checkpoint" in r.stderr, f"no --checkpoint: exit {r.returncode}")
    r = run([gpurun, "generate", "gen.yaml", "--checkpoint", "nope.h5"], cwd=tmp)
    check(r.returncode == 6 and b"nope.h5" in r.stderr, f"a missing checkpoint: exit {r.returncode} {r.stderr!r}")
    print("FAILED" if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
