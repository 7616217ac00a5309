#!/usr/bin/env bash
# e2e_regression.sh — the README's example that is not an image classifier: `gpurun data csv` on
# examples/regression/houses.csv, then examples/regression/houses.yaml (model.inputs/targets by
# name, mse) trains to a val mean squared error under 200 (the data's noise alone is 100; a
# model that predicts the train mean scores about 15,400); `gpurun eval` reports its loss and no accuracy;
# `predict` says it is for image classifiers; a field the split lacks is exit 2 at its item, naming
# the split's fields; a dense fed an int32 field says so.
#
#   bash tests/e2e_regression.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

mkdir -p data
expect_ok "wrote data/houses.h5" -- "$G" data csv data/houses.h5 --from "$SRC/examples/regression/houses.csv" \
    --target price_k --val-fraction 0.2
run "$G" "$SRC/examples/regression/houses.yaml" --run-dir "$T/run" --quiet
if [ "$RC" -eq 0 ]; then ok; else bad "the example job: exit $RC"; show; fi
check "val mean squared error under 200, no accuracy" "$PY" -c "
import json
ev = [json.loads(l) for l in open('$T/run/metrics.jsonl') if json.loads(l)['kind'] == 'eval']
assert ev and ev[-1]['loss'] < 200 and all('accuracy' not in e for e in ev), ev
s = json.load(open('$T/run/summary.json'))
assert s['status'] == 'finished' and s['best_val_accuracy'] is None and s['last_val_loss'] < 200, s
"
run "$G" eval "$SRC/examples/regression/houses.yaml" --checkpoint "$T/run/weights.h5"
check "gpurun eval: the val loss, no accuracy" "$PY" -c "
import json
e = json.loads(open('$OUT').read())
assert e['samples'] == 40 and e['loss'] < 200 and 'accuracy' not in e, e
"
expect 2 "model.inputs: predict is for image classifiers" -- \
    "$G" predict "$SRC/examples/regression/houses.yaml" --checkpoint "$T/run/weights.h5" data/houses.h5:/val
sed 's/inputs: \[features\]/inputs: [feature]/' "$SRC/examples/regression/houses.yaml" >"$T/typo.yaml"
expect 2 "typo.yaml:16:12: model.inputs[0]: data/houses.h5 has no field 'feature' (its fields: features, targets)" -- \
    "$G" "$T/typo.yaml" --run-dir "$T/r2"
"$PY" -c "
import h5py, numpy as np
with h5py.File('data/houses.h5', 'a') as f:
    f['train/ids'] = np.arange(160, dtype=np.int32).reshape(160, 1)
    f['val/ids'] = np.arange(40, dtype=np.int32).reshape(40, 1)
"
sed 's/inputs: \[features\]/inputs: [ids]/' "$SRC/examples/regression/houses.yaml" >"$T/ids.yaml"
expect 2 "dense takes a float input; 'ids' is int32 [n, 1] (integer ids need an embedding)" -- \
    "$G" "$T/ids.yaml" --run-dir "$T/r3"
e2e_done
