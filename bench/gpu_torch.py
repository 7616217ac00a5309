#!/usr/bin/env python3
"""bench/gpu_torch.py — PyTorch's side of bench/gpu.sh: ResNet-50 training throughput.

torchvision's resnet50() in channels_last, SGD (momentum 0.9, weight decay 3.05e-5),
cross-entropy with label smoothing 0.1 (the training recipe of configs/resnet50.yaml,
so both sides do the same arithmetic), on synthetic tensors created once on the device:
no data loading is timed. cudnn.benchmark is on. Channels-last for every precision, and
PyTorch's AMP for the half ones:
  fp32  TF32 off for cuBLAS and cuDNN          tf32  TF32 on for both
  bf16  torch.autocast(dtype=bfloat16), TF32 on for what stays in fp32
  fp16  torch.autocast(dtype=float16) and a GradScaler (dynamic loss scaling, as gpurun's
        fp16 default), TF32 on for what stays in fp32
After --warmup steps (cuDNN autotuning happens there), --steps steps are timed between
two device synchronisations. One JSON line per precision on stdout, e.g.
  {"precision": "fp32", "img_per_s": 1234.5, "step_ms": 207.4, ...}
or {"precision": "bf16", "error": "..."}; exit 1 if any precision failed.
--device cpu runs the same code on the CPU, to check this script without a GPU
(e.g. --device cpu --batch 2 --image 64 --warmup 1 --steps 1; torch before 2.x has no fp16
CPU autocast, so fp16 reports an error there).
"""
import argparse
import json
import sys
import time

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
AMP_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="ResNet-50 training throughput of PyTorch (eager), "
                                "one JSON line per precision")
    p.add_argument("--precision", default=",".join(PRECISIONS),
                   help="comma-separated list of fp32, tf32, bf16, fp16 (default: all)")
    p.add_argument("--batch", type=int, default=256, help="samples per step (default 256)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--steps", type=int, default=15, help="timed steps (default 15)")
    p.add_argument("--image", type=int, default=224, help="image side (default 224)")
    p.add_argument("--classes", type=int, default=1000, help="classes (default 1000)")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    a = p.parse_args(argv)
    a.precision = [s.strip() for s in a.precision.split(",") if s.strip()]
    bad = [s for s in a.precision if s not in PRECISIONS]
    if bad or not a.precision:
        p.error(f"--precision: unknown {bad or 'empty list'}; choose from {', '.join(PRECISIONS)}")
    for name in ("batch", "steps", "image", "classes"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    return a


def _has(obj, name):
    """hasattr that also survives torch.backends.cuda.matmul, which asserts on unknown names."""
    try:
        getattr(obj, name)
        return True
    except Exception:
        return False


def set_tf32(torch, on):
    """TF32 for cuBLAS and cuDNN convolutions. PyTorch 2.9+ has fp32_precision and warns about
    the allow_tf32 flags (and mixing the two APIs is an error), so use the newer one when present."""
    matmul = torch.backends.cuda.matmul
    conv = getattr(torch.backends.cudnn, "conv", None)
    if _has(matmul, "fp32_precision") and _has(conv, "fp32_precision"):
        mode = "tf32" if on else "ieee"
        matmul.fp32_precision = mode
        conv.fp32_precision = mode
        return mode
    matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return "allow_tf32" if on else "no_tf32"


def make_scaler(torch, dev, on):
    """PyTorch's GradScaler for fp16: torch.amp.GradScaler(device) where it exists (2.3+; the
    torch.cuda.amp one is deprecated there), else torch.cuda.amp's (CUDA only)."""
    if _has(torch.amp, "GradScaler"):
        try:
            return torch.amp.GradScaler(dev.type, enabled=on)
        except Exception:
            pass
    return torch.cuda.amp.GradScaler(enabled=on and dev.type == "cuda")


def run_one(torch, torchvision, a, prec, dev):
    torch.manual_seed(0)
    tf32 = set_tf32(torch, prec != "fp32")
    model = torchvision.models.resnet50(num_classes=a.classes).to(dev, memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=3.05e-5)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    x = torch.randn(a.batch, 3, a.image, a.image, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    amp = getattr(torch, AMP_DTYPES[prec]) if prec in AMP_DTYPES else None
    scaler = make_scaler(torch, dev, prec == "fp16")

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()   # all three pass through when the scaler is disabled
        scaler.step(opt)
        scaler.update()
        return loss

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    dt = time.perf_counter() - t0
    out = {"precision": prec, "img_per_s": round(a.batch * a.steps / dt, 2),
           "step_ms": round(1000 * dt / a.steps, 3), "batch": a.batch, "steps": a.steps,
           "warmup": a.warmup, "loss": round(float(loss), 4), "tf32": tf32,
           "autocast": AMP_DTYPES.get(prec), "channels_last": True, "grad_scaler": scaler.is_enabled()}
    if dev.type == "cuda":
        out["max_mem_gib"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 2)
    return out


def main(argv=None):
    a = parse_args(argv)
    import torch  # after argument parsing, so --help works without torch
    import torchvision
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": f"torch {torch.__version__}: CUDA is not available"}), flush=True)
        return 1
    torch.backends.cudnn.benchmark = True
    info = {"torch": torch.__version__, "torchvision": torchvision.__version__, "device": str(dev)}
    if dev.type == "cuda":
        info.update(gpu=torch.cuda.get_device_name(dev), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    failed = 0
    for prec in a.precision:
        try:
            out = run_one(torch, torchvision, a, prec, dev)
        except Exception as e:  # one precision failing (e.g. OOM) must not lose the others
            out = {"precision": prec, "error": f"{type(e).__name__}: {e}"[:500]}
            failed += 1
        out.update(info)
        print(json.dumps(out), flush=True)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
