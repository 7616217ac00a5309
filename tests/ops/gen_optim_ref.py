#!/usr/bin/env python3
"""gen_optim_ref.py — reference numbers for tests/ops/test_optim.c from PyTorch.

Prints C initializers; they are pasted into test_optim.c (nothing reads this
script at build or test time). Rerun with Debian's torch and re-paste:

    /usr/bin/python3 tests/ops/gen_optim_ref.py

Covers torch.optim.SGD (momentum 0.9, nesterov, weight_decay 1e-4),
torch.optim.AdamW (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01),
both foreach=False, 3 steps on a 5-element fp32 tensor with fixed gradients;
CosineAnnealingLR / StepLR / MultiStepLR lrs; clip_grad_norm_ factors.
"""
import math

import torch

W0 = [0.5, -1.25, 2.0, 0.75, -0.3]
GRADS = [
    [0.1, -0.2, 0.3, -0.4, 0.5],
    [-0.05, 0.15, 0.25, -0.35, 0.45],
    [0.2, 0.1, -0.3, 0.6, -0.7],
]


def c_array(name, values):
    body = ", ".join("%.9g" % v for v in values)
    print("static const %s %s[] = {%s};" % (
        "float" if name.endswith("_f") else "double", name, body))


def run_opt(make, tag, states):
    w = torch.nn.Parameter(torch.tensor(W0, dtype=torch.float32))
    opt = make([w])
    for t, g in enumerate(GRADS):
        w.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        c_array("%s_w%d_f" % (tag, t + 1), w.detach().tolist())
        st = opt.state[w]
        for key, cname in states:
            c_array("%s_%s%d_f" % (tag, cname, t + 1), st[key].tolist())


def main():
    torch.set_default_dtype(torch.float32)
    print("/* SGD lr=0.1 momentum=0.9 nesterov weight_decay=1e-4 */")
    run_opt(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                      weight_decay=1e-4, foreach=False),
            "ref_sgd", [("momentum_buffer", "buf")])
    print("/* AdamW lr=1e-3 betas=(0.9,0.999) eps=1e-8 weight_decay=0.01 */")
    run_opt(lambda p: torch.optim.AdamW(p, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                        weight_decay=0.01, foreach=False),
            "ref_adamw", [("exp_avg", "m"), ("exp_avg_sq", "v")])

    # Schedulers, stepped once per unit (optimizer step or epoch).
    def lrs(make, base, n):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=base)
        sch = make(opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sch.step()
        return out

    print("/* CosineAnnealingLR(T_max=20), base 0.1, eta_min 0: lr at steps 0..20 */")
    c_array("ref_cosine_lr", lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20),
                                 0.1, 21))
    print("/* StepLR(step_size=2, gamma=0.1), base 0.1: lr at epochs 0..6 */")
    c_array("ref_steplr_lr", lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.1),
                                 0.1, 7))
    print("/* MultiStepLR(milestones=[3,5], gamma=0.1), base 0.1: lr at epochs 0..6 */")
    c_array("ref_multisteplr_lr",
            lrs(lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[3, 5], gamma=0.1),
                0.1, 7))

    # clip_grad_norm_: returns the total norm; the factor is new/old of any element.
    print("/* clip_grad_norm_ on GRADS[0]: (max_norm, total norm, factor) */")
    rows = []
    for max_norm in (0.1, 0.5, 1.0, 10.0):
        p = torch.nn.Parameter(torch.zeros(5))
        p.grad = torch.tensor(GRADS[0], dtype=torch.float32)
        before = p.grad.clone()
        norm = float(torch.nn.utils.clip_grad_norm_([p], max_norm))
        factor = float((p.grad[4] / before[4]).item())
        rows += [max_norm, norm, factor]
    c_array("ref_clip", rows)
    assert math.isfinite(rows[1])


if __name__ == "__main__":
    main()
