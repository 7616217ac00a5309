"""embed_parity_torch.py — embedding and pos_embedding against PyTorch
(float64): nn.Embedding, and nanoGPT's `x = wte(idx) + wpe(arange(T))` with
a linear head (tied to wte as GPT's lm_head, or its own), cross-entropy over
every token (reduction='mean').

Runs test_op_embed cpu with GR_EMBED_DUMP=<tmp file>, which runs each case
through gpurun's CPU pipeline (one training pass at grad_scale 1/n: the
gradient of the mean over the tokens) and writes the ids, targets, the
embeddings' output, the loss and every parameter with its gradient; rebuilds
the model in torch on the same weights and compares (output and gradients:
max |a - b| / max |b| < 1e-5; loss: |a - b| / |b| < 1e-5). A tied head has
no weight of its own: its gradient is part of wte.weight's, as in torch.

Usage: embed_parity_torch.py path/to/test_op_embed"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyneed import need, run_dump  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-5


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def main():
    raw = run_dump(sys.argv[1], "GR_EMBED_DUMP", "embed.bin")
    off, cases, bad = 0, 0, 0
    while off < len(raw):
        n, T, vocab, dim, max_len, classes, nparams, _ = (int(v) for v in np.frombuffer(raw, np.int64, 8, off))
        off += 64
        tshape = [n, T] if T else [n]
        nt = int(np.prod(tshape))
        ids = np.frombuffer(raw, np.int32, nt, off).reshape(tshape)
        off += 4 * nt
        tgt = np.frombuffer(raw, np.int32, nt, off).reshape(tshape)
        off += 4 * nt
        x = np.frombuffer(raw, np.float32, nt * dim, off).reshape(tshape + [dim])
        off += 4 * nt * dim
        loss = float(np.frombuffer(raw, np.float64, 1, off)[0])
        off += 8
        params, grads = {}, {}
        for _ in range(nparams):
            ln, numel = (int(v) for v in np.frombuffer(raw, np.int64, 2, off))
            off += 16
            name = raw[off:off + ln].decode()
            off += ln
            params[name] = np.frombuffer(raw, np.float32, numel, off).astype(np.float64)
            off += 4 * numel
            grads[name] = np.frombuffer(raw, np.float32, numel, off)
            off += 4 * numel

        # the same model in torch, float64, on gpurun's weights
        wte = torch.nn.Embedding(vocab, dim).double()
        tp = {"wte.weight": wte.weight}
        with torch.no_grad():
            wte.weight.copy_(torch.tensor(params["wte.weight"].reshape(vocab, dim)))
        idx = torch.tensor(ids.astype(np.int64))
        h = wte(idx)
        if max_len:
            wpe = torch.nn.Embedding(max_len, dim).double()
            with torch.no_grad():
                wpe.weight.copy_(torch.tensor(params["wpe.weight"].reshape(max_len, dim)))
            tp["wpe.weight"] = wpe.weight
            h = h + wpe(torch.arange(T))  # nanoGPT: tok_emb + pos_emb, broadcast over the batch
        if "head.weight" in params:
            head = torch.nn.Linear(dim, classes, bias="head.bias" in params).double()
            with torch.no_grad():
                head.weight.copy_(torch.tensor(params["head.weight"].reshape(classes, dim)))
                if head.bias is not None:
                    head.bias.copy_(torch.tensor(params["head.bias"]))
            tp["head.weight"] = head.weight
            if head.bias is not None:
                tp["head.bias"] = head.bias
            logits = head(h)
        else:  # lm_head.weight = wte.weight (tied)
            logits = F.linear(h, wte.weight)
        tl = F.cross_entropy(logits.reshape(-1, classes), torch.tensor(tgt.astype(np.int64)).reshape(-1))
        tl.backward()
        errs = {"x": rel(x, h.detach().numpy()), "loss": abs(loss - float(tl)) / abs(float(tl))}
        for name, t in tp.items():
            errs[name] = rel(grads[name], t.grad.numpy().reshape(-1))
        missing = sorted(set(grads) - set(tp))
        desc = "n %d T %-2d vocab %-2d dim %d max_len %-2d %s" % (
            n, T, vocab, dim, max_len, "tied head" if "head.weight" not in params else "head")
        print("%-50s loss %.9g (torch %.9g); rel err %s" % (
            desc, loss, float(tl), ", ".join("%s %.1e" % kv for kv in errs.items())))
        if missing or not all(e < TOL for e in errs.values()):
            bad += 1
            print("  FAIL" + (" (gpurun parameters torch lacks: %s)" % missing if missing else ""))
        cases += 1
    if cases == 0:
        sys.exit("no cases in the dump")
    print("%d cases, %d failed" % (cases, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
