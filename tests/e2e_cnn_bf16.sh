#!/usr/bin/env bash
# e2e_cnn_bf16.sh — native mixed precision through the CLI:
#   - `gpurun plan` of configs/resnet50.yaml at precision bf16: the layers'
#     outputs are bf16, the input batch fp32, and the training activation
#     arena is about half of fp32's (0.45-0.55x);
#   - the Fashion-MNIST CNN (configs/fashion-mnist-cnn.yaml) on the CPU's
#     native bf16 kernels and on the staged reference (GPURUN_HALF=staged:
#     every kernel in fp32 on converted copies) agrees in every step's loss
#     within 1e-2 relative over 50 steps of plain SGD (lr 0.01);
#   - one epoch of it in bf16 reaches fp32's test accuracy within 0.5 points.
# The runs use one thread: ctest runs two tests at once on two cores, and
# OpenMP's spinning barriers of two multi-threaded processes on them slow a
# run tens of times. The native comparisons need a CPU with AVX-512 BF16 or AMX (gpurun plan
# says "bf16 native"); elsewhere they report skipped, and so do the
# Fashion-MNIST parts without the dataset package.
#
#   bash tests/e2e_cnn_bf16.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py numpy

# ---- the plan: types and bytes
for p in fp32 bf16; do
    "$G" plan "$SRC/configs/resnet50.yaml" --set precision=$p --set device=cpu >"$T/r50_$p.plan" 2>&1 ||
        bad "plan resnet50 $p failed: $(head -3 "$T/r50_$p.plan")"
done
check "resnet50 plan in bf16: conv/batchnorm/relu outputs bf16, input fp32, activations 0.45-0.55x fp32's" \
    "$PY" - "$T" <<'EOF'
import re, sys
T = sys.argv[1]
def text(p):
    return open(f"{T}/r50_{p}.plan").read()
def act(p):
    return int(re.search(r"activations\s+([0-9,]+)\s+\(train", text(p)).group(1).replace(",", ""))
b = text("bf16")
rows = {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)\s+\S+\s+\[[^\]]*\]\s+(\S+)\s", b, re.M)}
assert rows["input"] == "fp32", rows["input"]
for name, t in rows.items():
    if name.startswith(("conv", "batchnorm", "relu", "add")):
        assert t == "bf16", (name, t)
assert "bf16 " in re.search(r"without reuse: ([^)]*)\)", b).group(1)
r = act("bf16") / act("fp32")
print("activations bf16/fp32 = %.3f" % r)
assert 0.45 <= r <= 0.55, r
EOF

native=$(grep -c "bf16 native" "$T/r50_bf16.plan")
if [ "$native" -eq 0 ]; then
    why=$(grep -o 'bf16 staged.*' "$T/r50_bf16.plan" | head -1)
    e2e_skip "this CPU has no native bf16 ($why): native runs not compared"
elif ! e2e_have_fmnist; then
    e2e_skip "the Fashion-MNIST runs: $E2E_NO_FMNIST"
else
    "$G" data fashion-mnist "$T/fm.h5" >/dev/null 2>&1 || bad "gpurun data fashion-mnist (fixture)"
    sed "s#data/fashion-mnist.h5#$T/fm.h5#g" "$SRC/configs/fashion-mnist-cnn.yaml" >"$T/cnn.yaml"
    # ---- native vs staged (and fp32, for scale), 50 steps of plain SGD at lr 0.01: with
    # momentum 0.9 at lr 0.05 the first steps are chaotic, and any two roundings (fp32 vs
    # bf16 too) part by tens of percent within 30 steps
    for r in native:bf16 staged:bf16 native:fp32; do
        expect 0 -- env GPURUN_HALF=${r%:*} "$G" "$T/cnn.yaml" --quiet --device cpu --threads 1 \
            --run-dir "$T/s_${r/:/_}" --set precision=${r#*:} --set train.steps=50 --set log.every_steps=1 \
            --set checkpoint.every_steps=0 --set "train.optimizer={type: sgd, lr: 0.01}"
    done
    check "bf16 native vs staged: every step's loss within 1e-2 relative over 50 steps" "$PY" - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
def losses(r):
    return [l["loss"] for l in map(json.loads, open(f"{T}/s_{r}/metrics.jsonl")) if l["kind"] == "train"]
n, s, f = losses("native_bf16"), losses("staged_bf16"), losses("native_fp32")
assert len(n) == len(s) == 50, (len(n), len(s))
rel = [abs(a - b) / abs(b) for a, b in zip(n, s)]
ref = max(abs(a - b) / abs(b) for a, b in zip(s, f))
print("max rel diff %.2e at step %d (staged bf16 vs fp32: %.2e); losses %.4f -> %.4f" %
      (max(rel), rel.index(max(rel)) + 1, ref, n[0], n[-1]))
assert max(rel) < 1e-2, rel
assert n != s, "the native run computed exactly what the staged one did: no native kernel ran"
assert n[-1] < 0.8 * n[0], ("did not learn", n[0], n[-1])
sn = json.load(open(f"{T}/s_native_bf16/summary.json"))["half_staged_ops"].split(", ")
ss = json.load(open(f"{T}/s_staged_bf16/summary.json"))["half_staged_ops"].split(", ")
assert "conv" in ss and "conv" not in sn and "batchnorm" not in sn, (sn, ss)
EOF
    # ---- one epoch: bf16 against fp32
    for p in fp32 bf16; do
        E2E_TIMEOUT=600 expect 0 -- "$G" "$T/cnn.yaml" --quiet --device cpu --threads 1 --run-dir "$T/e_$p" \
            --set precision=$p --set log.every_steps=1000 --set checkpoint.every_steps=0
    done
    check "Fashion-MNIST CNN, one epoch: bf16 test accuracy within 0.5 points of fp32's" "$PY" - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
a = {p: json.load(open(f"{T}/e_{p}/summary.json"))["last_val_accuracy"] for p in ("fp32", "bf16")}
print("accuracy fp32 %.4f bf16 %.4f" % (a["fp32"], a["bf16"]))
assert a["fp32"] > 0.85, a
assert a["bf16"] >= a["fp32"] - 0.005, a
EOF
fi

e2e_done
