#!/usr/bin/env bash
# e2e_deep.sh — deeper models than the gradient checks and parity tests build, which is where
# a pointer into the graph's node or tensor array, kept across a call that appends, reads freed
# memory (gr_autodiff on ResNet-18 with 7+ blocks in a stage). Runs in the release
# build and in the sanitizer build, where GPURUN_GROW_STRESS moves every array on each growth:
#   - tests/specs/resnet18-deep.yaml (basic blocks [2, 8, 10, 2]): `gpurun plan` gives the
#     parameter count worked out by hand (22,391,882), then 3 training steps on synthetic
#     3x32x32 data give finite losses and weights.h5;
#   - configs/resnet50.yaml with the final add of its `down` block deleted (a mutation that
#     crashed `gpurun plan`): planned, with the unused-output warning;
#   - configs/resnet101.yaml and configs/resnet152.yaml: torchvision's parameter counts
#     (44,549,160 and 60,192,808; tests/resnet_torchvision.py compares a training step).
#
#   bash tests/e2e_deep.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

params() { grep -q "^total parameters: $2\$" "$1"; }

# ---- the deep ResNet-18: plan, then a few steps
DEEP=$SRC/tests/specs/resnet18-deep.yaml
expect_ok "total parameters: 22,391,882" -- "$G" plan "$DEEP"
expect 0 -- "$G" data synthetic "$T/syn.h5" --n 24 --test 8 --shape 3,32,32
expect 0 -- "$G" "$DEEP" --quiet --run-dir "$T/deep" --set data.train.path="$T/syn.h5" \
    --set data.val.path="$T/syn.h5" --set train.batch_size=4 --set train.steps=3 --set log.every_steps=1 \
    --set eval.every_epochs=0 --set log.tensorboard=false
losses=$(grep -c '"kind":"train".*"loss":[-0-9]' "$T/deep/metrics.jsonl" 2>/dev/null)
check "resnet18-deep: 3 train lines with a numeric loss in metrics.jsonl (got ${losses:-none})" \
    test "${losses:-0}" -eq 3
check "resnet18-deep: weights.h5 written" test -s "$T/deep/weights.h5"

# ---- ResNet-50 with the down block's add deleted: batchnorm2's output goes unused
sed '/{add: {}, input: \[batchnorm2, proj_bn\]}/d' "$SRC/configs/resnet50.yaml" >"$T/r50_noadd.yaml"
check "the mutation removed one line" test "$(wc -l <"$T/r50_noadd.yaml")" -eq \
    "$(($(wc -l <"$SRC/configs/resnet50.yaml") - 1))"
expect 0 "warning: the output of layer down0.batchnorm2 is never used" -- "$G" plan "$T/r50_noadd.yaml"

# ---- the deeper shipped configs: torchvision's counts
for c in resnet101:44,549,160 resnet152:60,192,808; do
    run "$G" plan "$SRC/configs/${c%%:*}.yaml"
    check "${c%%:*}: plan exits 0 with ${c#*:} parameters (exit $RC)" params "$OUT" "${c#*:}"
done

e2e_done
