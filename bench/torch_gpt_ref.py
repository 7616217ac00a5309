#!/usr/bin/python3
"""torch_gpt_ref.py — PyTorch's side of bench/gpt.sh: nanoGPT's model (the same
layers as configs/gpt2-124m.yaml and configs/fortunes-gpt.yaml: token and
position embeddings, pre-norm blocks of causal self-attention and a tanh-GELU
MLP, a final layernorm, a head tied to the token embedding) trained with
AdamW on random tokens, timed per optimizer step.

    /usr/bin/python3 bench/torch_gpt_ref.py --layers 12 --heads 12 --width 768 --vocab 50304 \\
        --block 1024 --batch 4 --seq 64 --steps 10 [--threads N] [--autocast bf16]

Prints one JSON line: the median step time over the steps after one warm-up
step, and tokens/s (batch x seq / median). PyTorch at its fastest eager
setting for the precision: fp32 as is, bf16 with torch.autocast; attention
through F.scaled_dot_product_attention(is_causal=True) where the torch has it
(2.0 on: flash or memory-efficient kernels on a GPU), else the explicit
softmax(q k^T) v with a causal mask (Debian's torch 1.13, nanoGPT without
flash). --device cuda times with torch.cuda.synchronize (bench/gpu.sh).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x, mask):
        n, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(n, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            att = att.masked_fill(mask[:t, :t] == 0, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(n, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, heads, c, vocab, block):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(block, c)
        self.h = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)))
        for name, p in self.named_parameters():  # nanoGPT's initialization
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets, classes):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for b in self.h:
            x = b(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.T  # the tied head
        return F.cross_entropy(logits[..., :classes].reshape(-1, classes).float(), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50304, help="embedding rows (padded)")
    ap.add_argument("--classes", type=int, default=0, help="real vocabulary (0: --vocab)")
    ap.add_argument("--block", type=int, default=1024, help="position table")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--autocast", choices=["bf16"], help="torch.autocast at bf16")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    classes = a.classes or a.vocab
    dev = torch.device(a.device)
    model = GPT(a.layers, a.heads, a.width, a.vocab, a.block).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times, losses = [], []
    for step in range(a.steps + 1):
        idx = torch.randint(0, classes, (a.batch, a.seq), device=dev)
        tgt = torch.randint(0, classes, (a.batch, a.seq), device=dev)
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = model(idx, tgt, classes)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        if step > 0:
            times.append(dt)
        losses.append(loss.item())
    med = statistics.median(times)
    print(json.dumps({"step_s": med, "tokens_per_s": a.batch * a.seq / med, "loss_first": losses[0],
                      "loss_last": losses[-1], "threads": torch.get_num_threads(),
                      "params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
