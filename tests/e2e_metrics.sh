#!/usr/bin/env bash
# e2e_metrics.sh — train.metrics: the metric ops a job declares, each reported by name:
#   - [accuracy, {accuracy: {top_k: 3}}]: metrics.jsonl's eval lines and `gpurun eval` carry
#     accuracy and accuracy_top3 (top-3 at least top-1; 1.0 for top-10 of 10 classes),
#     TensorBoard gets val/accuracy_top3, summary.json keeps the top-1 accuracy;
#   - absent: accuracy alone, as every job before; []: no metric (loss alone, summary's
#     accuracies null);
#   - errors at the item's line (exit 2): an unknown metric, the same one twice, top_k over the
#     classes, a malformed item.
#
#   bash tests/e2e_metrics.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# A synthetic split of 10 classes of 1x4x4 images; a linear model, 20 steps: seconds.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

expect_ok "" -- "$G" data synthetic "$T/d.h5" --n 200 --shape 1,4,4 --classes 10 --test 50
job() { # NAME METRICS-LINE
    cat >"$T/$1.yaml" <<YAML
name: $1
data:
  train: {path: $T/d.h5, group: /train}
  val: {path: $T/d.h5, group: /test}
  workers: 0
model:
  layers: [flatten, {dense: {units: 10}}]
train:
  batch_size: 10
  steps: 20
  optimizer: {type: sgd, lr: 0.1}
$2
eval: {every_steps: 10}
log: {every_steps: 10}
YAML
}

job top3 "  metrics: [accuracy, {accuracy: {top_k: 3}}, {accuracy: {top_k: 10}}]"
run "$G" "$T/top3.yaml" --run-dir "$T/r3" --quiet
if [ "$RC" -eq 0 ]; then ok; else bad "a job with top-3 and top-10 accuracy: exit $RC"; show; fi
check "eval lines carry accuracy, accuracy_top3 and accuracy_top10 (top-3 >= top-1, top-10 = 1)" "$PY" -c "
import json, sys
ev = [json.loads(l) for l in open('$T/r3/metrics.jsonl') if json.loads(l)['kind'] == 'eval']
assert len(ev) == 2, ev
for e in ev:
    assert 0 <= e['accuracy'] <= e['accuracy_top3'] <= e['accuracy_top10'] == 1.0, e
s = json.load(open('$T/r3/summary.json'))
assert s['last_val_accuracy'] == ev[-1]['accuracy'], (s['last_val_accuracy'], ev[-1])
"
check "TensorBoard has val/accuracy_top3" grep -qa "val/accuracy_top3" "$T"/r3/events.out.tfevents.*
run "$G" eval "$T/top3.yaml" --checkpoint "$T/r3/weights.h5"
if [ "$RC" -eq 0 ] && grep -q '"accuracy_top3"' "$OUT"; then ok; else bad "gpurun eval: no accuracy_top3"; show; fi

job plain ""
run "$G" "$T/plain.yaml" --run-dir "$T/rp" --quiet
check "no train.metrics: accuracy alone, as before" "$PY" -c "
import json
ev = [json.loads(l) for l in open('$T/rp/metrics.jsonl') if json.loads(l)['kind'] == 'eval']
assert ev and all(sorted(k for k in e if 'accuracy' in k) == ['accuracy'] for e in ev), ev
"
job none "  metrics: []"
run "$G" "$T/none.yaml" --run-dir "$T/rn" --quiet
check "metrics: [] reports the loss alone" "$PY" -c "
import json
ev = [json.loads(l) for l in open('$T/rn/metrics.jsonl') if json.loads(l)['kind'] == 'eval']
assert ev and all('accuracy' not in e and e['loss'] > 0 for e in ev), ev
s = json.load(open('$T/rn/summary.json'))
assert s['best_val_accuracy'] is None, s
"

job unknown "  metrics: [accuracy, precision]"
expect 2 "unknown.yaml:12:23: train.metrics[1]: unknown metric 'precision' (metrics: accuracy)" -- \
    "$G" validate "$T/unknown.yaml"
job twice "  metrics: [accuracy, {accuracy: {top_k: 1}}]"
expect 2 "train.metrics[1].accuracy: accuracy is already train.metrics[0]" -- "$G" validate "$T/twice.yaml"
job big "  metrics: [{accuracy: {top_k: 11}}]"
expect 2 "train.metrics[0].accuracy: accuracy: top_k 11 is more than the 10 classes" -- \
    "$G" "$T/big.yaml" --run-dir "$T/rb"
job form "  metrics: [{accuracy: {top_k: 2}, name: x}]"
expect 2 "train.metrics[0]: expected a metric's name or a map like {accuracy: {top_k: 5}}" -- \
    "$G" validate "$T/form.yaml"
e2e_done
