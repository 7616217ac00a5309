#!/usr/bin/env bash
# e2e_errors.sh — every error path of the gpurun command line (DESIGN 1.1-1.5):
# exit codes (1.2) and messages that name the file, key or dataset at fault.
#
#   bash tests/e2e_errors.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Uses only tiny HDF5 files (made with /usr/bin/python3 + h5py) and tiny specs
# (train.steps: 2), so it runs in a few seconds. Prints `N passed, M failed`
# last and exits non-zero when M > 0.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

# ---------------------------------------------------------------- fixtures
"$PY" - "$T" <<'EOF' || { echo "FAIL: cannot make HDF5 fixtures with $PY (h5py, numpy)"; echo "0 passed, 1 failed"; exit 1; }
import sys, h5py, numpy as np
T = sys.argv[1]
rng = np.random.default_rng(0)
img = rng.integers(0, 256, (64, 1, 4, 4), dtype=np.uint8)
lab = (np.arange(64) % 10).astype(np.uint8)

def w(name, images=None, labels=None, group="train", val=False, attrs={}):
    with h5py.File(f"{T}/{name}.h5", "w") as f:
        g = f.create_group(group)
        for k, a in attrs.items(): g.attrs[k] = a
        if images is not None: g["images"] = images
        if labels is not None: g["labels"] = labels
        if val:
            v = f.create_group("val")
            v["images"] = img[:32]
            v["labels"] = lab[:32]

w("tiny", img, lab, val=True)
w("nogroup", img, lab, group="other")
w("noimages", None, lab)
w("nolabels", img, None)
w("mismatch", img, lab[:63])
neg = lab.astype(np.int32); neg[5] = -1
w("neglabel", img, neg)
w("int16", img.astype(np.int16), lab)
w("rank2", img.reshape(64, 16), lab)
w("labels2d", img, lab.reshape(8, 8))
w("flabels", img, lab.astype(np.float32))
big = np.zeros(64, np.uint8); big[3] = 9
w("label9", img, big)
w("few", img[:8], lab[:8])
lab3 = (np.arange(64) % 3).astype(np.uint8)
with h5py.File(f"{T}/cls3.h5", "w") as f:   # classes: the same names in both splits, or not
    for g, names in (("train", ["cat", "dog", "fox"]), ("val", ["cat", "dog", "fox"]), ("val2", ["cat", "dog", "emu"]),
                     ("val4", ["cat", "dog", "fox", "emu"]), ("valbad", None)):
        f[g + "/images"] = img
        f[g + "/labels"] = lab3
        f[g].attrs["classes"] = [5, 6, 7] if names is None else names
w("std0", img, lab, attrs={"mean": [100.0], "std": [0.0]})
w("meanonly", img, lab, attrs={"mean": [100.0]})
w("meanstr", img, lab, attrs={"mean": "x", "std": [50.0]})
w("std3", img, lab, attrs={"mean": [1.0, 2.0, 3.0], "std": [1.0, 1.0, 1.0]})
open(f"{T}/garbage.h5", "wb").write(np.random.default_rng(1).integers(0, 256, 8192, dtype=np.uint8).tobytes())
open(f"{T}/empty.h5", "wb").close()
raw = open(f"{T}/tiny.h5", "rb").read()
open(f"{T}/tiny_half.h5", "wb").write(raw[: len(raw) // 2])
EOF

# spec NAME [DATAFILE [SED-EXPR]] : writes $T/NAME.yaml, a tiny job on DATAFILE (default tiny.h5,
# group /train; val /val only for tiny.h5). Line numbers below are relied on by the tests.
spec() {
    local name=$1 data=${2:-tiny} expr=${3:-}
    local val=""
    [ "$data" = tiny ] && val="  val: {path: $T/tiny.h5, group: /val}"
    {
        echo "name: tiny"                                   # 1
        echo "seed: 0"                                      # 2
        echo "data:"                                        # 3
        echo "  train: {path: $T/$data.h5, group: /train}"  # 4
        echo "${val:-  shuffle: true}"                      # 5
        echo "model:"                                       # 6
        echo "  layers:"                                    # 7
        echo "    - flatten"                                # 8
        echo "    - dense: {units: 8}"                      # 9
        echo "    - relu"                                   # 10
        echo "    - dense: {units: 10}"                     # 11
        echo "train:"                                       # 12
        echo "  batch_size: 16"                             # 13
        echo "  steps: 2"                                   # 14
        echo "  optimizer: {type: sgd, lr: 0.1}"            # 15
        echo "log: {every_steps: 1}"                        # 16
    } >"$T/$name.yaml"
    if [ -n "$expr" ]; then sed -i "$expr" "$T/$name.yaml"; fi
}

spec ok
# the checks on the Fashion-MNIST file (a real-size MLP job, a truncated copy, --force) run where
# the dataset package is installed (FM=1) and are skipped elsewhere
FM=0
if e2e_have_fmnist; then
    FM=1
    "$G" data fashion-mnist "$T/fm.h5" >/dev/null 2>&1 || bad "gpurun data fashion-mnist $T/fm.h5 failed (fixture)"
    sed "s#data/fashion-mnist.h5#$T/fm.h5#g" "$SRC/configs/fashion-mnist-mlp.yaml" >"$T/mlp.yaml"
else
    e2e_skip "the checks on the Fashion-MNIST file: $E2E_NO_FMNIST"
fi

# ---------------------------------------------------------------- usage (1.1)
expect_fail 2 "usage: gpurun" -- "$G"
# a usage error is one line and where the usage is, not the whole usage
expect_fail 2 "unknown option '--bogus'" "see 'gpurun --help'" -- "$G" --bogus
check "a usage error prints no usage" test "$(wc -l <"$ERR")" -eq 2
expect_fail 2 "unknown option '--bogus'" "see 'gpurun plan --help'" -- "$G" plan "$T/ok.yaml" --bogus
expect_fail 2 "no command or file named 'trian' (did you mean 'run'?)" "commands: run, plan, validate" -- "$G" trian
expect_fail 2 "no command or file named 'plna' (did you mean 'plan'?)" -- "$G" plna
expect_fail 2 "nope.yaml: cannot read job spec" -- "$G" nope.yaml
# every command has --help: its own usage on stdout, exit 0
for c in run plan validate eval data summarize plot; do
    want="gpurun $c "
    [ "$c" = run ] && want="gpurun [run] JOB.yaml"
    expect_ok "usage: $want" -- "$G" "$c" --help
done
expect_ok "usage: gpurun plan JOB.yaml" -- "$G" plan "$T/ok.yaml" -h
expect_ok "gpurun data imagefolder OUT.h5" -- "$G" data imagefolder --help
expect_fail 2 "unknown option '--bogus'" -- "$G" "$T/ok.yaml" --bogus
expect_fail 2 "unexpected argument 'extra.yaml'" -- "$G" "$T/ok.yaml" extra.yaml
expect_fail 2 "unexpected argument 'extra.yaml'" -- "$G" validate "$T/ok.yaml" extra.yaml
expect_fail 2 "frobnicate" -- "$G" frobnicate
expect_fail 2 "expected a job spec" -- "$G" validate
expect_fail 2 "--set" -- "$G" validate "$T/ok.yaml" --set
expect_fail 2 "--run-dir" -- "$G" "$T/ok.yaml" --run-dir
expect_fail 2 "--threads" -- "$G" "$T/ok.yaml" --threads 0
expect_ok "usage: gpurun" "gpurun validate" "exit codes" -- "$G" --help
expect_ok "usage: gpurun" -- "$G" -h
expect_ok "gpurun " -- "$G" --version
check "--version prints 'gpurun X.Y.Z'" grep -qE '^gpurun [0-9]+\.[0-9]+' "$OUT"

# ---------------------------------------------------------------- environment knobs (common/env.h)
# an unknown GPURUN_* name or a malformed value stops every command before it starts, exit 2
expect_fail 2 "GPURUN_FOO=1: unknown environment variable" "gpurun reads GPURUN_GEMM" -- \
    env GPURUN_FOO=1 "$G" validate "$T/ok.yaml"
expect_fail 2 "GPURUN_GEMN=openblas: unknown environment variable (did you mean GPURUN_GEMM?)" -- \
    env GPURUN_GEMN=openblas "$G" "$T/ok.yaml" --run-dir "$T/env_run"
expect_fail 2 "GPURUN_GEMM=blas: expected onednn or openblas" -- env GPURUN_GEMM=blas "$G" plan "$T/ok.yaml"
expect_fail 2 "GPURUN_DATA_MEM_LIMIT=2G: expected an integer >= 0 (bytes)" -- \
    env GPURUN_DATA_MEM_LIMIT=2G "$G" "$T/ok.yaml" --run-dir "$T/env_run"
expect_fail 2 "GPURUN_LOSS_SCALE_INTERVAL=0: expected an integer >= 1 (steps)" -- \
    env GPURUN_LOSS_SCALE_INTERVAL=0 "$G" "$T/ok.yaml" --run-dir "$T/env_run"
expect_fail 2 "GPURUN_CONV_LAYOUT=nchw: expected plain or blocked" -- \
    env GPURUN_CONV_LAYOUT=nchw "$G" data synthetic "$T/env.h5" --n 4 --shape 1,2,2
check "refused environments made no run directory nor data file" test ! -e "$T/env_run" -a ! -e "$T/env.h5"
expect_ok "train:" -- env GPURUN_GEMM=openblas GPURUN_DATA_DIRECT=0 GPURUN_CMAKE_ARGS=-DX=1 \
    "$G" validate "$T/ok.yaml"

# ---------------------------------------------------------------- job spec (1.4): exit 2
expect_fail 2 "$T/nope.yaml" -- "$G" "$T/nope.yaml"
expect_fail 2 "$T/nope.yaml" -- "$G" validate "$T/nope.yaml"
expect_fail 2 "$T/nope.yaml" -- "$G" plan "$T/nope.yaml"

spec unknown_key tiny 's/^seed: 0/sedd: 0/'
expect_fail 2 "$T/unknown_key.yaml:2:1: sedd: unknown key" "did you mean 'seed'" -- "$G" validate "$T/unknown_key.yaml"
expect_fail 2 "$T/unknown_key.yaml:2:1: sedd:" -- "$G" "$T/unknown_key.yaml" --run-dir "$T/rd_unknown_key"
check "a spec error leaves no run directory" test ! -e "$T/rd_unknown_key"
expect_fail 2 "$T/unknown_key.yaml:2:1: sedd:" -- "$G" plan "$T/unknown_key.yaml"

spec nested_key tiny 's/{type: sgd, lr: 0.1}/{type: sgd, lr: 0.1, momentom: 0.9}/'
expect_fail 2 "$T/nested_key.yaml:15:" "train.optimizer.momentom" -- "$G" validate "$T/nested_key.yaml"

spec wrong_type tiny 's/batch_size: 16/batch_size: abc/'
expect_fail 2 "$T/wrong_type.yaml:13:15: train.batch_size:" "abc" -- "$G" validate "$T/wrong_type.yaml"
spec neg_lr tiny 's/lr: 0.1/lr: -0.1/'
expect_fail 2 "$T/neg_lr.yaml:15:30: train.optimizer.lr:" -- "$G" validate "$T/neg_lr.yaml"
spec nan_lr tiny 's/lr: 0.1/lr: .nan/'
expect_fail 2 "$T/nan_lr.yaml:15:30: train.optimizer.lr:" -- "$G" validate "$T/nan_lr.yaml"
spec nan_lr2 tiny 's/lr: 0.1/lr: nan/'
expect_fail 2 "$T/nan_lr2.yaml:15:30: train.optimizer.lr:" -- "$G" validate "$T/nan_lr2.yaml"
spec inf_lr tiny 's/lr: 0.1/lr: .inf/'
expect_fail 2 "$T/inf_lr.yaml:15:30: train.optimizer.lr:" -- "$G" validate "$T/inf_lr.yaml"
spec batch0 tiny 's/batch_size: 16/batch_size: 0/'
expect_fail 2 "$T/batch0.yaml:13:15: train.batch_size:" -- "$G" validate "$T/batch0.yaml"
expect_fail 2 "$T/batch0.yaml:13:15: train.batch_size:" -- "$G" "$T/batch0.yaml" --run-dir "$T/rd_batch0"

expect_fail 2 "train.optimizer.lrr" -- "$G" validate "$T/ok.yaml" --set train.optimizer.lrr=0.1
expect_fail 2 "nosuch.key" -- "$G" validate "$T/ok.yaml" --set nosuch.key=1
expect_fail 2 "train.optimizer.lr" "abc" -- "$G" validate "$T/ok.yaml" --set train.optimizer.lr=abc
expect_fail 2 "train.optimizer.lr" -- "$G" validate "$T/ok.yaml" --set train.optimizer.lr=-1
expect_fail 2 "train.batch_size" -- "$G" "$T/ok.yaml" --set train.batch_size=0 --run-dir "$T/rd_set0"
# values schema v1 accepts but this version does not honour: refused at the value by validate, plan and a run
spec determ tiny 's/^seed: 0/deterministic: true/'
expect_fail 2 "$T/determ.yaml:2:16: deterministic: true is not supported yet" -- "$G" validate "$T/determ.yaml"
expect_fail 2 "$T/determ.yaml:2:16: deterministic:" -- "$G" "$T/determ.yaml" --run-dir "$T/rd_determ"
check "an unhonoured value leaves no run directory" test ! -e "$T/rd_determ"
# NCCL sums GPU buffers: asked for on the cpu, refused naming the key, nothing written
expect_fail 2 "parallel.backend: nccl sums GPU buffers, but the job runs on device cpu" -- \
    "$G" "$T/ok.yaml" --set parallel.backend=nccl --device cpu --run-dir "$T/rd_nccl"
check "a refused backend leaves no run directory" test ! -e "$T/rd_nccl"
expect_ok "deterministic: false" "backend: none" -- \
    "$G" validate "$T/ok.yaml" --set deterministic=false --set parallel.backend=none
# a layer whose output nothing reads: a warning naming it (its parameters would still decay)
spec deadlayer tiny 's/    - relu/    - {relu: {}, input: flatten0}/'
expect 0 "deadlayer.yaml: warning: the output of layer dense0 is never used (its parameters are still updated" -- \
    "$G" plan "$T/deadlayer.yaml"
check "no such warning for the plain spec" bash -c "! '$G' plan '$T/ok.yaml' 2>&1 | grep -q 'never used'"
# a layer attribute --set added is blamed on --set, not on the file
expect_fail 2 "--set:1:1: model.layers[1].dense.unitz: unknown attribute (dense takes units, bias, tied, transpose)" -- \
    "$G" validate "$T/ok.yaml" --set model.layers.1.dense.unitz=3
expect_fail 2 "KEY=VALUE" -- "$G" validate "$T/ok.yaml" --set train.optimizer.lr

if [ $FM = 1 ]; then
    expect_ok "micro_batch: 128" "shuffle: true" "lr: 0.0123" "batch_size: 128" -- \
        "$G" validate "$T/mlp.yaml" --set train.optimizer.lr=0.0123
fi
expect_ok "micro_batch: 16" "shuffle: true" "momentum: 0" -- "$G" validate "$T/ok.yaml"
expect_ok "seed: 7" "flip: true" -- "$G" validate "$T/ok.yaml" --set seed=7 --set data.augment.flip=true
expect_ok "mean:" "0.5" "std:" "0.25" -- \
    "$G" validate "$T/ok.yaml" --set "data.normalize.mean=[0.5]" --set "data.normalize.std=[0.25]"
expect_fail 2 "--resume" -- "$G" plan "$T/ok.yaml" --resume some/path.h5
[ $FM = 0 ] || expect_ok "total parameters: 535,818" -- "$G" plan "$T/mlp.yaml"

# ---------------------------------------------------------------- model errors: exit 2
spec op_typo tiny 's/- relu/- rellu/'
expect_fail 2 "$T/op_typo.yaml:10:" "unknown op 'rellu'" "did you mean 'relu'" -- "$G" plan "$T/op_typo.yaml"
expect_fail 2 "unknown op 'rellu'" "did you mean 'relu'" -- "$G" "$T/op_typo.yaml" --run-dir "$T/rd_op_typo"
# validate is the schema check (1.1); op names and attributes are schema (1.4: unknown keys are errors)
expect_fail 2 "$T/op_typo.yaml:10:" "unknown op 'rellu'" -- "$G" validate "$T/op_typo.yaml"
spec dense_attr tiny 's/dense: {units: 8}/dense: {units: 8, foo: 1}/'
expect_fail 2 "$T/dense_attr.yaml:9:" "dense.foo" -- "$G" plan "$T/dense_attr.yaml"
expect_fail 2 "$T/dense_attr.yaml:9:" "dense.foo" -- "$G" validate "$T/dense_attr.yaml"
# layernorm's eps must be in (0, 1], and it takes eps and bias only: exit 2 at the key
spec ln_eps tiny 's/    - relu/    - {layernorm: {eps: 0}}/'
expect_fail 2 "$T/ln_eps.yaml:10:25: model.layers[2].layernorm.eps: eps must be positive" -- \
    "$G" validate "$T/ln_eps.yaml"
spec ln_key tiny 's/    - relu/    - {layernorm: {bias: false, elementwise_affine: true}}/'
ln_want="model.layers[2].layernorm.elementwise_affine: unknown attribute (layernorm takes eps, bias)"
expect_fail 2 "$T/ln_key.yaml:10:33: $ln_want" -- "$G" plan "$T/ln_key.yaml"
spec ln_ok tiny 's/    - relu/    - {layernorm: {eps: 1e-6}}\n    - gelu_tanh/'
expect_ok "layernorm" "gelu_tanh" -- "$G" plan "$T/ln_ok.yaml"
spec dense_nounits tiny 's/dense: {units: 8}/dense: {bias: true}/'
expect_fail 2 "$T/dense_nounits.yaml:9:" "units" -- "$G" plan "$T/dense_nounits.yaml"
spec no_flatten tiny '/- flatten/d'
expect_fail 2 "$T/no_flatten.yaml" "dense" "flatten" -- "$G" plan "$T/no_flatten.yaml"
spec not_2d tiny '/- flatten/d; /- dense/d'
expect_fail 2 "$T/not_2d.yaml" "model.layers" -- "$G" plan "$T/not_2d.yaml"
expect_fail 2 "model.layers" -- "$G" "$T/not_2d.yaml" --run-dir "$T/rd_not_2d"

# ---------------------------------------------------------------- data errors (1.5): exit 3
spec nofile nothere
expect_fail 3 "$T/nothere.h5" -- "$G" "$T/nofile.yaml" --run-dir "$T/rd_nofile"
check "a data error leaves no run directory" test ! -e "$T/rd_nofile"
expect_fail 3 "$T/nothere.h5" -- "$G" plan "$T/nofile.yaml"
# out of memory (exit 4): under a 2 GB address-space limit (the process itself takes about
# 0.5 GB of it, libraries and the thread pools' reservations, more with more threads), a model
# of 2.5M hidden units (0.8 GB of weights and gradients; 0.64 GB per activation, so the
# training arena alone needs 1.28 GB): the message gives the bytes needed, free and total;
# nothing is written. (1.5M units did it while cuBLAS, linked, took 0.6 GB of the space.)
# `plan` warns beforehand. (Not in sanitizer builds: ASan cannot start under ulimit -v.)
if { bash -c "ulimit -v 2000000 && exec '$G' --version" >/dev/null 2>&1; } 2>/dev/null; then
    expect_fail 4 "out of memory on cpu: the " "bytes free of" -- bash -c "ulimit -v 2000000 && exec '$G' '$T/ok.yaml' \
        --quiet --device cpu --run-dir '$T/rd_oom' --set model.layers.1.dense.units=2500000 --set train.batch_size=64"
    check "out of memory: no run directory left" test ! -e "$T/rd_oom"
    bash -c "ulimit -v 2000000 && exec '$G' plan '$T/ok.yaml' --set device=cpu --set model.layers.1.dense.units=2500000 \
        --set train.batch_size=64" >"$T/oom.plan" 2>&1
    check "plan under the same limit: warns the job will not fit on the cpu" \
        grep -qE "^warning: this job needs [0-9,]+ bytes on cpu .*it will not fit" "$T/oom.plan"
    # arenas that fit (1.03 GB: two 8000-unit layers under AdamW) but not the checkpoints' host
    # copy of the model after them (0.77 GB: the parameters and both moments): exit 4 naming that
    # copy, before the run directory is made; plan's host table warns
    sed -e 's/- dense: {units: 8}/- dense: {units: 8000}\n    - relu\n    - dense: {units: 8000}/' \
        -e 's/type: sgd, lr: 0.1/type: adamw, lr: 0.001/' "$T/ok.yaml" >"$T/wide.yaml"
    expect_fail 4 "out of memory on the host: the checkpoints' copy of the parameters and optimizer state needs" \
        "bytes free of" -- bash -c "ulimit -v 2000000 && exec '$G' '$T/wide.yaml' --quiet --device cpu --run-dir '$T/rd_oom2'"
    check "out of memory in the saver's copy: no run directory left" test ! -e "$T/rd_oom2"
    bash -c "ulimit -v 2000000 && exec '$G' plan '$T/wide.yaml' --set device=cpu" >"$T/oom2.plan" 2>&1
    check "plan under the same limit: warns the host memory will not suffice" \
        grep -qE "^warning: a run of this job needs [0-9,]+ more bytes of host memory, more than the [0-9,]+ free" \
        "$T/oom2.plan"
else
    echo "note: $G does not start under ulimit -v (a sanitizer build?): the out-of-memory checks are skipped"
fi

# a checkpoint.dir that cannot be made: exit 6 naming it, before any file of the run is
# written (a rerun with a good one then starts, not "already holds a run")
echo x >"$T/ckfile"
expect_fail 6 "cannot create the checkpoint directory $T/ckfile/sub" -- "$G" "$T/ok.yaml" --quiet \
    --run-dir "$T/rd_ckdir" --set checkpoint.dir="$T/ckfile/sub"
check "a checkpoint directory that cannot be made: no config.yaml, metrics.jsonl or events written" \
    bash -c "[ -z \"\$(ls -A '$T/rd_ckdir' 2>/dev/null)\" ]"
expect 0 -- "$G" "$T/ok.yaml" --quiet --run-dir "$T/rd_ckdir" --set checkpoint.dir="$T/ckgood"
# the default normalization from the file's mean/std attributes: nonsense there is a data error
for b in "std0:mean[0] = 100, std[0] = 0" "meanonly:mean has 1 values, std 0" "meanstr:mean is not a list of numbers" \
         "std3:3 values for 1 channels"; do
    spec "${b%%:*}" "${b%%:*}"
    expect_fail 3 "$T/${b%%:*}.h5: /train: attributes mean/std (the default normalization): ${b#*:}" -- \
        "$G" "$T/${b%%:*}.yaml" --run-dir "$T/rd_${b%%:*}"
done
spec noval tiny 's#path: [^,]*tiny.h5, group: /val#path: '"$T"'/noval.h5, group: /val#'
expect_fail 3 "$T/noval.h5" -- "$G" "$T/noval.yaml" --run-dir "$T/rd_noval"
spec badvalgroup tiny 's#group: /val#group: /nosuchval#'
expect_fail 3 "$T/tiny.h5" "/nosuchval" -- "$G" "$T/badvalgroup.yaml" --run-dir "$T/rd_badvalgroup"
spec badgroup tiny 's#group: /train#group: /nosuch#'
expect_fail 3 "$T/tiny.h5" "/nosuch" -- "$G" "$T/badgroup.yaml" --run-dir "$T/rd_badgroup"
spec nogroup nogroup
expect_fail 3 "$T/nogroup.h5" "/train" -- "$G" "$T/nogroup.yaml" --run-dir "$T/rd_nogroup"
spec noimages noimages
expect_fail 3 "$T/noimages.h5" "/train/images" -- "$G" "$T/noimages.yaml" --run-dir "$T/rd_noimages"
spec nolabels nolabels
expect_fail 3 "$T/nolabels.h5" "/train/labels" -- "$G" "$T/nolabels.yaml" --run-dir "$T/rd_nolabels"
spec mismatch mismatch
expect_fail 3 "$T/mismatch.h5" "64" "63" -- "$G" "$T/mismatch.yaml" --run-dir "$T/rd_mismatch"
spec label9 label9 's/units: 10/units: 5/'
expect_fail 3 "$T/label9.h5" "label 9" "5 outputs" -- "$G" "$T/label9.yaml" --run-dir "$T/rd_label9"
expect_fail 3 "$T/label9.h5" "label 9" -- "$G" plan "$T/label9.yaml"
# the data must fit the model: the classes of train and val, the model's outputs
spec cls10 cls3 's#  shuffle: true#  val: {path: '"$T"'/cls3.h5, group: /val}#'
expect_fail 2 "$T/cls10.yaml:11:7: model.layers[3]: the model has 10 outputs, but $T/cls3.h5: /train has 3 classes" \
    "end the model with a layer of 3 outputs" -- "$G" "$T/cls10.yaml" --run-dir "$T/rd_cls10"
check "a model wider than the classes: no run directory" test ! -e "$T/rd_cls10/config.yaml"
expect_fail 2 "$T/cls10.yaml:11:7: model.layers[3]: the model has 10 outputs" -- "$G" plan "$T/cls10.yaml"
spec cls3ok cls3 's#  shuffle: true#  val: {path: '"$T"'/cls3.h5, group: /val}#; s/units: 10/units: 3/'
expect 0 -- "$G" "$T/cls3ok.yaml" --quiet --run-dir "$T/rd_cls3ok"
expect_fail 3 "$T/cls3.h5: /train and $T/cls3.h5: /val2: the classes differ: class 2 is 'fox' in the one, 'emu' in the other" \
    -- "$G" "$T/cls3ok.yaml" --run-dir "$T/rd_cls3v2" --set data.val.group=/val2
expect_fail 3 "the classes differ: 3 classes in the one, 4 in the other (class 3 is 'emu')" \
    -- "$G" "$T/cls3ok.yaml" --run-dir "$T/rd_cls3v4" --set data.val.group=/val4
expect_fail 3 "$T/cls3.h5: /valbad: attribute classes: expected a list of class names" \
    -- "$G" "$T/cls3ok.yaml" --run-dir "$T/rd_cls3vb" --set data.val.group=/valbad
# validate checks the data too (item 4): that it exists, where the spec names it, and fits the model
expect_fail 2 "model.layers[3]: the model has 10 outputs" -- "$G" validate "$T/cls10.yaml"
expect_fail 3 "the classes differ" -- "$G" validate "$T/cls3ok.yaml" --set data.val.group=/val2
expect_fail 3 "$T/label9.h5" "label 9" "5 outputs" -- "$G" validate "$T/label9.yaml"
spec nodata nosuch
expect_fail 3 "$T/nodata.yaml:4:17: data.train.path: $T/nosuch.h5: no such file" -- "$G" validate "$T/nodata.yaml"
expect_fail 3 "$T/nodata.yaml:4:17: data.train.path: $T/nosuch.h5: no such file" -- \
    "$G" "$T/nodata.yaml" --run-dir "$T/rd_nodata"
expect_fail 3 "--set:1:1: data.val.path: $T/nosuch.h5: no such file" -- \
    "$G" validate "$T/ok.yaml" --set data.val.path="$T/nosuch.h5"
expect 0 -- "$G" validate "$T/nodata.yaml" --no-data
expect 0 -- "$G" validate "$T/cls3ok.yaml"
spec neglabel neglabel
expect_fail 3 "$T/neglabel.h5" "/train/labels" "-1" -- "$G" "$T/neglabel.yaml" --run-dir "$T/rd_neglabel"
spec int16 int16
expect_fail 3 "$T/int16.h5" "/train/images" "int16" -- "$G" "$T/int16.yaml" --run-dir "$T/rd_int16"
spec rank2 rank2
expect_fail 3 "$T/rank2.h5" "/train/images" "rank 2" -- "$G" "$T/rank2.yaml" --run-dir "$T/rd_rank2"
spec labels2d labels2d
expect_fail 3 "$T/labels2d.h5" "/train/labels" -- "$G" "$T/labels2d.yaml" --run-dir "$T/rd_labels2d"
spec flabels flabels
expect_fail 3 "$T/flabels.h5" "/train/labels" -- "$G" "$T/flabels.yaml" --run-dir "$T/rd_flabels"
spec few few
expect_fail 3 "$T/few.h5" "16" -- "$G" "$T/few.yaml" --run-dir "$T/rd_few"

# truncated / garbage / empty files: exit 3, the file named, no HDF5 error stack, no crash
if [ $FM = 1 ]; then
    head -c $(( $(stat -c %s "$T/fm.h5") / 2 )) "$T/fm.h5" >"$T/fm_half.h5"
    spec fm_half fm_half
    expect_fail 3 "$T/fm_half.h5" -- "$G" "$T/fm_half.yaml" --run-dir "$T/rd_fm_half"
    expect_fail 3 "$T/fm_half.h5" -- "$G" plan "$T/fm_half.yaml"
fi
spec tiny_half tiny_half
expect_fail 3 "$T/tiny_half.h5" -- "$G" "$T/tiny_half.yaml" --run-dir "$T/rd_tiny_half"
spec garbage garbage
expect_fail 3 "$T/garbage.h5" -- "$G" "$T/garbage.yaml" --run-dir "$T/rd_garbage"
spec empty empty
expect_fail 3 "$T/empty.h5" -- "$G" "$T/empty.yaml" --run-dir "$T/rd_empty"
mkdir -p "$T/adir.h5"
spec adir adir
expect_fail 3 "$T/adir.h5" -- "$G" "$T/adir.yaml" --run-dir "$T/rd_adir"

spec input_mismatch tiny 's/^model:/model:\n  input: [3, 4, 4]/'
expect_fail 3 "$T/tiny.h5" "model.input" -- "$G" "$T/input_mismatch.yaml" --run-dir "$T/rd_input"

# augmentation: a crop that cannot be taken is a data error naming the sizes;
# crops that fit train (the model sees the crop; val gets the centre crop)
spec crop_big tiny 's/^model:/  augment: {crop: {size: 9, padding: 2}, flip: true}\nmodel:/'
expect_fail 3 "$T/tiny.h5" "/train/images" "crop 9 is larger than the padded image 8x8" -- \
    "$G" "$T/crop_big.yaml" --run-dir "$T/rd_crop_big"
spec crop_ok tiny 's/^model:/  augment: {crop: {size: 4, padding: 1}, flip: true}\nmodel:/'
expect_ok -- "$G" "$T/crop_ok.yaml" "${THREADS[@]}" --run-dir "$T/rd_crop_ok" --quiet
spec crop_rrc tiny 's/^model:/  augment: {crop: {size: 3, type: resized, scale: [0.5, 1.0]}, flip: true}\nmodel:/'
expect_ok "[16, 1, 3, 3]" -- "$G" plan "$T/crop_rrc.yaml"
expect_ok -- "$G" "$T/crop_rrc.yaml" --run-dir "$T/rd_crop_rrc" --quiet
check "a resized-crop run evaluates on the centre crop" grep -q '"kind":"eval"' "$T/rd_crop_rrc/metrics.jsonl"
expect_fail 2 "crop.ratio" -- "$G" validate "$T/crop_rrc.yaml" --set data.augment.crop.ratio=[2,1]
expect_fail 2 "crop.padding" "type random only" -- "$G" validate "$T/crop_rrc.yaml" \
    --set data.augment.crop.padding=2
expect_fail 2 "data.cache" "auto, memory, none" -- "$G" validate "$T/ok.yaml" --set data.cache=disk
expect_fail 2 "data.decode" "auto, cpu, gpu" -- "$G" validate "$T/ok.yaml" --set data.decode=nvjpeg
expect_fail 2 "data.decode" "is not one (it stores pixels)" -- "$G" validate "$T/ok.yaml" --set data.decode=gpu
for c in memory none; do
    expect_ok -- "$G" "$T/crop_ok.yaml" "${THREADS[@]}" --run-dir "$T/rd_cache_$c" --quiet --set data.cache=$c
    check "data.cache $c: the same losses as auto" cmp <(grep -o '"loss":[^,]*' "$T/rd_crop_ok/metrics.jsonl") \
        <(grep -o '"loss":[^,]*' "$T/rd_cache_$c/metrics.jsonl")
done
# data.workers auto: on the cpu the training thread makes a batch of stored pixels; a number is taken as it is
expect_ok "data: 0 loader threads (data.workers auto: on the cpu the training thread makes each batch" -- \
    "$G" plan "$T/crop_ok.yaml" --set device=cpu
expect_ok "data: 3 loader threads (data.workers)" -- "$G" plan "$T/crop_ok.yaml" --set device=cpu --set data.workers=3
expect_fail 2 "data.workers" "expected auto or an integer, got 'some'" -- "$G" validate "$T/ok.yaml" --set data.workers=some
expect_fail 2 "data.workers" "expected auto or an integer <= 256, got 300" -- "$G" validate "$T/ok.yaml" --set data.workers=300
expect_fail 2 "data.workers" "expected auto or an integer >= 0, got -1" -- "$G" validate "$T/ok.yaml" --set data.workers=-1
for w in 0 1 2 3; do
    expect_ok -- "$G" "$T/crop_ok.yaml" "${THREADS[@]}" --run-dir "$T/rd_workers_$w" --quiet --set data.workers=$w --set data.prefetch=2
    check "data.workers $w: the same losses as auto" cmp <(grep -o '"loss":[^,]*' "$T/rd_crop_ok/metrics.jsonl") \
        <(grep -o '"loss":[^,]*' "$T/rd_workers_$w/metrics.jsonl")
done

# device auto that ends on the cpu (no GPU, or a build without CUDA) says so on stderr,
# even with --quiet
run "$G" "$T/ok.yaml" --quiet --device auto --run-dir "$T/rd_auto"
if [ "$RC" -ne 0 ]; then
    bad "device auto --quiet: exit code $RC, expected 0"; show
elif grep -qF '"device":"cpu"' "$T/rd_auto/summary.json" &&
    ! { grep -qxE 'gpurun: device auto: (no GPU found|this gpurun was built without CUDA); training on the cpu' "$ERR" &&
        [ "$(wc -l <"$ERR")" -eq 1 ]; }; then
    bad "device auto on a machine without a GPU: not the one plain line on stderr (--quiet)"; show
else
    ok
fi

# eval and predict say it too, as what they do
run "$G" eval "$T/ok.yaml" --device auto --checkpoint "$T/rd_auto/checkpoints/step-000000002.h5"
if grep -qF '"device":"cpu"' "$T/rd_auto/summary.json"; then
    check "eval with device auto on a machine without a GPU: 'running on the cpu'" \
        grep -qxE 'gpurun: device auto: (no GPU found|this gpurun was built without CUDA); running on the cpu' "$ERR"
fi

# model.init_from: the final weights.h5 of a run loads into the same model;
# missing, mis-shaped and corrupted tensors are checkpoint errors (exit 6)
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$T/rd_w" --quiet
check "a finished run exports weights.h5" test -s "$T/rd_w/weights.h5"
# eval takes the final weights.h5 as it takes a checkpoint: the same figures as the last checkpoint's
expect_ok '"kind":"eval","split":"val","checkpoint":"'"$T/rd_w/weights.h5"'","step":null,"samples":32,' -- \
    "$G" eval "$T/ok.yaml" --checkpoint "$T/rd_w/weights.h5"
cp "$OUT" "$T/eval_w.json"
expect_ok '"step":2,"samples":32,' -- "$G" eval "$T/ok.yaml" --checkpoint "$T/rd_w/checkpoints/step-000000002.h5"
check "eval of weights.h5: the loss and accuracy of the final checkpoint" "$PY" -c "
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert (a['loss'], a['accuracy']) == (b['loss'], b['accuracy']), (a, b)" "$T/eval_w.json" "$OUT"
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$T/rd_w2" --quiet --set model.init_from="$T/rd_w/weights.h5"
expect_fail 6 "$T/nope.h5" -- "$G" "$T/ok.yaml" --run-dir "$T/rd_w3" --set model.init_from="$T/nope.h5"
"$PY" - "$T" <<'EOF2' || bad "cannot make the bad weight files"
import sys, h5py, numpy as np, shutil
T = sys.argv[1]
shutil.copy(f"{T}/rd_w/weights.h5", f"{T}/w_shape.h5")
with h5py.File(f"{T}/w_shape.h5", "a") as f:
    del f["/params/dense0/weight"]
    f["/params/dense0/weight"] = np.zeros((8, 15), np.float32)
shutil.copy(f"{T}/rd_w/weights.h5", f"{T}/w_missing.h5")
with h5py.File(f"{T}/w_missing.h5", "a") as f:
    del f["/params/dense1/bias"]
shutil.copy(f"{T}/rd_w/weights.h5", f"{T}/w_crc.h5")
with h5py.File(f"{T}/w_crc.h5", "a") as f:
    d = f["/params/dense1/weight"]; v = d[...]; v[0, 0] += 1.0; d[...] = v
EOF2
expect_fail 6 "$T/w_shape.h5" "/params/dense0/weight" "shape [8, 15], but [8, 16] is expected" -- \
    "$G" "$T/ok.yaml" --run-dir "$T/rd_w4" --set model.init_from="$T/w_shape.h5"
expect_fail 6 "$T/w_missing.h5" "/params/dense1/bias" "missing" -- \
    "$G" "$T/ok.yaml" --run-dir "$T/rd_w5" --set model.init_from="$T/w_missing.h5"
expect_fail 6 "$T/w_crc.h5" "/params/dense1/weight" "crc32c mismatch" -- \
    "$G" "$T/ok.yaml" --run-dir "$T/rd_w6" --set model.init_from="$T/w_crc.h5"
# GPT-2 weights (Hugging Face safetensors, llm.c's checkpoint; told by content, not name) into a model
# that is not GPT-2 shaped: exit 6 naming the model's tensor without a counterpart
"$PY" - "$T" <<'EOF2' || bad "cannot make the GPT-2 weight files"
import json, struct, sys
T = sys.argv[1]
h = json.dumps({"wte.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
open(f"{T}/gpt2.h5", "wb").write(struct.pack("<Q", len(h)) + h + bytes(16))
hdr = [20240326, 3, 1, 1, 1, 1, 1, 1] + [0] * 248
open(f"{T}/gpt2.weights", "wb").write(struct.pack("<256i", *hdr) + bytes(4 * (1 + 1 + 12 + 13 + 2)))
EOF2
expect_fail 6 "$T/gpt2.h5" "GPT-2 checkpoint (Hugging Face safetensors)" "dense0.weight has no counterpart" -- \
    "$G" "$T/ok.yaml" --run-dir "$T/rd_w7" --set model.init_from="$T/gpt2.h5"
expect_fail 6 "$T/gpt2.weights" "GPT-2 checkpoint (llm.c)" "dense0.weight has no counterpart" -- \
    "$G" "$T/ok.yaml" --run-dir "$T/rd_w8" --set model.init_from="$T/gpt2.weights"

# ---------------------------------------------------------------- run directory (1.3)
R=$T/run1
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$R" --quiet
for f in config.yaml metrics.jsonl summary.json; do
    check "run writes $f" test -s "$R/$f"
done
check "config.yaml is the resolved spec" grep -qF "micro_batch: 16" "$R/config.yaml"
# what the data decided is written down too: the input shape and the normalization (/255 here);
# std0.h5-like attributes would be used instead, so a rerun of config.yaml on other data is the same job
check "config.yaml holds model.input [1, 4, 4] and data.normalize (mean [0], std [255])" bash -c "
    grep -qE '^  input: \[1, 4, 4\]' '$R/config.yaml' && grep -qE '^    mean: \[0\]' '$R/config.yaml' &&
    grep -qE '^    std: \[255\]' '$R/config.yaml'"
expect 0 -- "$G" validate "$R/config.yaml"
check "metrics.jsonl: strict JSON, train and eval lines with the 1.3 keys" "$PY" - "$R/metrics.jsonl" <<'EOF'
import json, sys
def strict(s):
    def no(c): raise ValueError("non-finite number " + c)
    return json.loads(s, parse_constant=no)
lines = [strict(l) for l in open(sys.argv[1]) if l.strip()]
train = [l for l in lines if l.get("kind") == "train"]
ev = [l for l in lines if l.get("kind") == "eval"]
assert train, "no train line"
assert ev, "no eval line"
for l in train:
    miss = {"kind", "step", "epoch", "loss", "lr", "samples_per_s", "loss_scale", "time_s"} - set(l)
    assert not miss, ("train line lacks", miss, l)
for l in ev:
    miss = {"kind", "split", "step", "epoch", "loss", "accuracy"} - set(l)
    assert not miss, ("eval line lacks", miss, l)
assert train[-1]["step"] == 2, train
assert ev[-1]["split"] == "val" and ev[-1]["step"] == 2, ev
EOF
check "summary.json: status finished, steps 2" "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]), parse_constant=lambda c: 1 / 0)
assert s["status"] == "finished", s
assert s["steps"] == 2, s
d = s["device_detail"]  # what the device computes with (gr_backend_describe)
if s["device"] == "cpu":
    assert d.startswith("oneDNN ") and ", ISA " in d and "; GEMM " in d, s
else:
    assert "compute capability" in d, s
' "$R/summary.json"
"$G" plan "$T/ok.yaml" --set device=cpu >"$T/ok.plan" 2>&1
check "plan names the instruction set oneDNN dispatches to and the CPU paths" \
    grep -qE "^cpu: oneDNN [0-9]+\.[0-9]+\.[0-9]+, ISA [a-z0-9_ ]+; GEMM (onednn|openblas), conv (onednn|ref); bf16 (native|available|staged \(no AVX-512 BF16 or AMX\))$" "$T/ok.plan"
GPURUN_GEMM=openblas GPURUN_CONV=ref "$G" plan "$T/ok.yaml" --set device=cpu >"$T/ok2.plan" 2>&1
check "plan: the GEMM and conv paths follow GPURUN_GEMM and GPURUN_CONV" grep -qE "; GEMM openblas, conv ref; bf16 " "$T/ok2.plan"

mkdir -p "$T/before"
cp "$R/config.yaml" "$R/metrics.jsonl" "$R/summary.json" "$T/before/"
expect_fail 2 "$R" -- "$G" "$T/ok.yaml" --run-dir "$R"
for f in config.yaml metrics.jsonl summary.json; do
    check "a refused second run leaves $f untouched" cmp "$T/before/$f" "$R/$f"
done
expect_fail 2 "$R" -- "$G" "$T/ok.yaml" --run-dir "$R" --set train.steps=3
check "a refused run with another spec leaves config.yaml untouched" cmp "$T/before/config.yaml" "$R/config.yaml"
# --resume auto on a finished run: nothing to do, nothing touched (sweeps rerun every job so)
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$R" --resume auto --quiet
check "--resume auto on a finished run says so, and how to train further" grep -qF "this run already finished (summary.json); nothing to do (to train it further, start a new run with --set model.init_from=$R/weights.h5)" "$ERR"
for f in config.yaml metrics.jsonl summary.json; do
    check "--resume auto on a finished run leaves $f untouched" cmp "$T/before/$f" "$R/$f"
done
# --resume auto on a run whose summary.json is gone: resumes from its last
# checkpoint (the end), so nothing is trained or logged twice
rm "$R/summary.json"
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$R" --resume auto
check "--resume auto says where it resumes" grep -qF "resuming from $R/checkpoints/step-000000002.h5 at step 2" "$ERR"
check "--resume auto run finished" grep -qF '"status":"finished"' "$R/summary.json"
check "--resume auto from the end logs no step twice" test "$(grep -c '"kind":"train"' "$R/metrics.jsonl")" -eq 2
# and without checkpoints: starts again; the earlier attempt's lines are
# dropped (its steps are redone), so metrics.jsonl reads like one run
rm -r "$R/summary.json" "$R/checkpoints"
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$R" --resume auto
check "--resume auto without a checkpoint says it starts fresh" grep -qF "no checkpoint in $R/checkpoints; starting fresh" "$ERR"
check "--resume auto from scratch logs each step once" test "$(grep -c '"kind":"train"' "$R/metrics.jsonl")" -eq 2
# --resume auto into a fresh directory: first start of the preemptible idiom
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$T/run_auto" --resume auto --quiet
check "--resume auto on a fresh dir writes summary.json" test -s "$T/run_auto/summary.json"

touch "$T/a_file"
# a run directory that cannot be made is a storage error (DESIGN 1.2: exit 6), not a spec error
expect_fail 6 "$T/a_file" "a file is in the way" -- "$G" "$T/ok.yaml" --run-dir "$T/a_file"
expect_fail 6 "$T/a_file" "a file is in the way" -- "$G" "$T/ok.yaml" --run-dir "$T/a_file/sub"

# eval.every_epochs: 0 = no periodic eval, one at the end only
expect_ok -- "$G" "$T/ok.yaml" --run-dir "$T/run_eval0" --quiet --set eval.every_epochs=0 --set train.steps=9
check "eval.every_epochs=0 evaluates once, at the end" "$PY" -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if "\"eval\"" in l]
assert [e["step"] for e in ev] == [9], ev
' "$T/run_eval0/metrics.jsonl"

# ---------------------------------------------------------------- divergence: exit 5
spec diverge tiny 's/lr: 0.1/lr: 1e30/'
expect_fail 5 "diverged" -- "$G" "$T/diverge.yaml" --run-dir "$T/run_div" --quiet
check "summary.json: status diverged (strict JSON)" "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]), parse_constant=lambda c: 1 / 0)
assert s["status"] == "diverged", s
' "$T/run_div/summary.json"
check "metrics.jsonl after divergence is strict JSON" "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    if l.strip(): json.loads(l, parse_constant=lambda c: 1 / 0)
' "$T/run_div/metrics.jsonl"

# ---------------------------------------------------------------- device: exit 7 / 2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "note: a GPU is present; skipping the no-GPU --device cuda checks"
else
    expect_fail 7 "CUDA" -- "$G" "$T/ok.yaml" --device cuda --run-dir "$T/rd_cuda"
    expect_fail 7 "CUDA" -- "$G" "$T/ok.yaml" --device cuda:0 --run-dir "$T/rd_cuda0"
    expect_fail 7 "CUDA" -- "$G" "$T/ok.yaml" --set device=cuda --run-dir "$T/rd_cuda_set"
fi
expect_fail 2 "tpu" -- "$G" "$T/ok.yaml" --device tpu --run-dir "$T/rd_tpu"
# precision: tf32 runs (the CPU computes it in fp32 and says so); fp16/bf16: tests/e2e_precision.sh
expect_ok "done:" -- "$G" "$T/ok.yaml" --device cpu --set precision=tf32 --run-dir "$T/rd_tf32"
check "tf32 on the cpu says it computes in fp32" bash -c \
    "'$G' '$T/ok.yaml' --device cpu --set precision=tf32 --run-dir '$T/rd_tf32b' 2>&1 >/dev/null | grep -q 'cpu computes in full fp32'"
expect_fail 2 "loss_scale" -- "$G" validate "$T/ok.yaml" --set loss_scale=-1
# the GPU run options are schema keys (booleans), whatever the device
expect_ok "cuda_graph: false" "cudnn_benchmark: true" -- "$G" validate "$T/ok.yaml" --set cuda_graph=false \
    --set cudnn_benchmark=true
expect_fail 2 "cuda_graph" -- "$G" validate "$T/ok.yaml" --set cuda_graph=maybe
spec dev_tpu tiny 's/^seed: 0/device: tpu/'
expect_fail 2 "$T/dev_tpu.yaml:2:" "device" -- "$G" validate "$T/dev_tpu.yaml"

# ---------------------------------------------------------------- gpurun eval JOB --checkpoint PATH
expect_ok '"kind":"eval"' '"split":"val"' -- "$G" eval "$T/ok.yaml" --checkpoint "$R/checkpoints/step-000000002.h5"
check "eval of the final checkpoint equals the run's last eval" "$PY" -c '
import json, sys
got = json.loads(open(sys.argv[1]).read())
last = [json.loads(l) for l in open(sys.argv[2]) if "\"eval\"" in l][-1]
assert got["loss"] == last["loss"] and got["accuracy"] == last["accuracy"] and got["step"] == 2, (got, last)
' "$OUT" "$R/metrics.jsonl"
expect_ok '"split":"train"' '"samples":64' -- "$G" eval "$T/ok.yaml" --checkpoint "$R/checkpoints/step-000000002.h5" --split train
NO_TORCH=$(e2e_lacks torch)
if [ -z "$NO_TORCH" ]; then
    expect_ok "loaded into a torch MLP [16, 8, 10]: ok" -- "$PY" "$SRC/docs/checkpoint_reader.py" \
        "$R/checkpoints/step-000000002.h5" --mlp 16,8,10
else
    e2e_skip "docs/checkpoint_reader.py into a torch MLP: $NO_TORCH"
fi
expect_fail 2 "eval: --checkpoint PATH (a checkpoint or a run's weights.h5) is required" -- "$G" eval "$T/ok.yaml"
expect_fail 2 "--split: expected val or train" -- "$G" eval "$T/ok.yaml" --checkpoint x.h5 --split test
# neither a checkpoint nor a weights file (a dataset): exit 6 naming what is missing
expect_fail 6 "$T/tiny.h5" "attribute format" -- "$G" eval "$T/ok.yaml" --checkpoint "$T/tiny.h5"

# ---------------------------------------------------------------- --resume PATH that does not verify: exit 6
expect_fail 6 "some/path.h5" "No such file" -- "$G" "$T/ok.yaml" --resume some/path.h5 --run-dir "$T/rd_resume"
check "--resume PATH (refused) leaves no run directory" test ! -e "$T/rd_resume"

# ---------------------------------------------------------------- data converter
if [ $FM = 1 ]; then
    cp "$T/fm.h5" "$T/fm_copy.h5"
    expect_fail 2 "$T/fm.h5" "--force" -- "$G" data fashion-mnist "$T/fm.h5"
    check "data: the existing output is untouched without --force" cmp "$T/fm.h5" "$T/fm_copy.h5"
fi
expect_fail 3 "/nonexistent" -- "$G" data mnist "$T/m.h5" --from /nonexistent
expect_fail 3 "/nonexistent" -- "$G" data fashion-mnist "$T/m.h5" --from /nonexistent
mkdir -p "$T/idx_empty"
expect_fail 3 "$T/idx_empty/train-images-idx3-ubyte" -- "$G" data mnist "$T/m.h5" --from "$T/idx_empty"
expect_fail 2 "--from" -- "$G" data mnist "$T/m.h5"
expect_fail 2 "cifar10" -- "$G" data cifar10 "$T/c.h5"
expect_fail 2 "nosuchset" -- "$G" data nosuchset "$T/c.h5"
expect_fail 2 "data: expected a dataset name" "see 'gpurun data --help'" -- "$G" data

# truncated plain IDX (header says 100 images of 28x28, 500 data bytes follow)
mkdir -p "$T/idx_trunc"
"$PY" -c '
import struct, sys
open(sys.argv[1] + "/train-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, 100, 28, 28) + bytes(500))
' "$T/idx_trunc"
expect_fail 3 "$T/idx_trunc/train-images-idx3-ubyte" "truncated" -- "$G" data mnist "$T/m_trunc.h5" --from "$T/idx_trunc"
# IDX header cut short
mkdir -p "$T/idx_short"
printf '\0\0\10\3\0\0' >"$T/idx_short/train-images-idx3-ubyte"
expect_fail 3 "$T/idx_short/train-images-idx3-ubyte" -- "$G" data mnist "$T/m_short.h5" --from "$T/idx_short"
# truncated .gz (first half of the real labels file) and a .gz that is not gzip
if [ $FM = 1 ]; then
    mkdir -p "$T/idx_gz" "$T/idx_notgz"
    cp "$FMNIST"/*.gz "$T/idx_gz/"
    cp "$FMNIST"/*.gz "$T/idx_notgz/"
    L=$T/idx_gz/t10k-labels-idx1-ubyte.gz
    head -c $(( $(stat -c %s "$L") / 2 )) "$L" >"$L.part" && mv "$L.part" "$L"
    expect_fail 3 "$L" -- "$G" data fashion-mnist "$T/m_gz.h5" --from "$T/idx_gz"
    printf 'this is not gzip data at all' >"$T/idx_notgz/t10k-labels-idx1-ubyte.gz"
    expect_fail 3 "$T/idx_notgz/t10k-labels-idx1-ubyte.gz" -- "$G" data fashion-mnist "$T/m_notgz.h5" --from "$T/idx_notgz"
fi
check "failed conversions leave no output (nor temp) files" \
    bash -c "! ls -d '$T'/m.h5* '$T'/m_trunc.h5* '$T'/m_short.h5* '$T'/m_gz.h5* '$T'/m_notgz.h5* 2>/dev/null | grep -q ."

# ---------------------------------------------------------------- nothing leaked into the source tree
check "no runs/ directory made in the test's working directory" test ! -e "$T/runs"

e2e_done
