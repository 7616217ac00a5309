"""gpt_torch.py — nanoGPT's model in PyTorch, with the tensor names of
gpurun's GPT configs (configs/fortunes-gpt.yaml, configs/gpt2-124m.yaml:
token embedding `wte`, position table `wpe`, blocks `h0`, `h1`, ... of
`ln_1`, `c_attn`, `attn`, `c_proj`, `ln_2`, `c_fc`, gelu_tanh, `mlp_proj`,
then `ln_f` and a head tied to `wte`), and the loader of a gpurun weights
file (a run's weights.h5, or a checkpoint) into it. docs/language-models.md
shows its use; tests/generate_torch.py checks gpurun's greedy decoding
against it.

    import h5py, torch
    from gpt_torch import GPT, load_gpurun
    model = GPT(layers=4, heads=4, width=128, vocab=256, positions=64)
    load_gpurun(model, "runs/fortunes-gpt/weights.h5")
    logits = model(torch.tensor([[84, 104, 101]]))    # [1, 3, 256]
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        n, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(n, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(n, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, heads, width, vocab, positions):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(positions, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T  # the head tied to the token embedding


def gpurun_name(torch_name):
    """gpurun's tensor name of a state_dict key: h.3.ln_1.weight -> h3.ln_1.weight."""
    parts = torch_name.split(".")
    if parts[0] == "h":
        return "h" + parts[1] + "." + ".".join(parts[2:])
    return torch_name


def load_gpurun(model, path):
    """Copies every parameter from a gpurun weights file or checkpoint
    (/params/<layer>/<tensor>, DESIGN 1.6) into model."""
    import h5py
    with h5py.File(path, "r") as f:
        state = {}
        for key in model.state_dict():
            layer, tensor = gpurun_name(key).rsplit(".", 1)
            state[key] = torch.tensor(f["params"][layer][tensor][()])
    model.load_state_dict(state)
    return model
