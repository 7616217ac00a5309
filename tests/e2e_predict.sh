#!/usr/bin/env bash
# e2e_predict.sh — `gpurun predict JOB.yaml --checkpoint PATH [--top K] INPUT...`: a trained
# model applied to new inputs through the job's evaluation preprocessing:
#   - image files give what their conversion gives: the same probabilities as their samples in
#     the HDF5 file `gpurun data imagefolder` made of the same folder;
#   - a split FILE.h5:GROUP gives one line per sample whose probabilities are those `gpurun eval`
#     scores (the mean -log p[label] is eval's loss, top-1 against the label its accuracy);
#   - the lines: top K classes named by the train split's `classes`, probabilities descending;
#   - a final weights.h5 works as well as a checkpoint; errors: exit 2 (usage), 3 (an input
#     that is not an image, a split of another shape).
#
#   bash tests/e2e_predict.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# PNG fixtures written with Python's zlib; a 60-step linear model on 8x8 images: a few seconds.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

# three classes of coloured images (red, green, blue, with some noise), 8 of each; two more
# images of each colour kept aside as "new" inputs
"$PY" - "$T" <<'EOF' || { echo "FAIL: cannot write the PNG fixtures"; echo "0 passed, 1 failed"; exit 1; }
import os, struct, sys, zlib, random
T = sys.argv[1]
rnd = random.Random(4)
def png(path, w, h, rgb):
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    px = lambda: bytes(max(0, min(255, c + rnd.randint(-40, 40))) for c in rgb)
    raw = b"".join(b"\0" + b"".join(px() for _ in range(w)) for _ in range(h))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
colours = {"blue": (20, 30, 220), "green": (30, 200, 40), "red": (210, 30, 30)}
for name, rgb in colours.items():
    os.makedirs(f"{T}/folder/{name}", exist_ok=True)
    for i in range(8):
        png(f"{T}/folder/{name}/{i}.png", rnd.randint(8, 20), rnd.randint(8, 20), rgb)
    os.makedirs(f"{T}/new", exist_ok=True)
    for i in range(2):
        png(f"{T}/new/{name}{i}.png", 16, 12, rgb)
open(f"{T}/notimage.png", "w").write("not an image")
EOF
expect_ok "wrote $T/c.h5" -- "$G" data imagefolder "$T/c.h5" --from "$T/folder" --size 8
expect_ok "wrote $T/c.h5" -- "$G" data imagefolder "$T/c.h5" --from "$T/folder" --size 8 --group /val
cat >"$T/job.yaml" <<EOF
name: colours
seed: 1
device: cpu
data: {train: {path: $T/c.h5, group: /train}, val: {path: $T/c.h5, group: /val}}
model: {layers: [flatten, {dense: {units: 3}}]}
train: {batch_size: 8, steps: 60, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
eval: {every_steps: 60}
log: {every_steps: 20, tensorboard: false}
EOF
expect 0 -- "$G" "$T/job.yaml" --run-dir "$T/run" --quiet
CK=$T/run/checkpoints/step-000000060.h5

# ---- image files: the named classes, the same probabilities as their converted samples
ls "$T"/folder/*/*.png | sort >"$T/files.txt"   # the converter's order: class folders, then names
expect_ok '"input":"' -- "$G" predict "$T/job.yaml" --checkpoint "$CK" --top 3 $(cat "$T/files.txt")
cp "$OUT" "$T/files.jsonl"
expect_ok '"input":"'"$T/c.h5:/train"'","index":0,' -- "$G" predict "$T/job.yaml" --checkpoint "$CK" --top 3 \
    "$T/c.h5:/train"
cp "$OUT" "$T/train.jsonl"
check "image files: one line each, the same top 3 and probabilities as their samples in the converted file" \
    "$PY" - "$T/files.txt" "$T/files.jsonl" "$T/train.jsonl" <<'EOF'
import json, sys
files = open(sys.argv[1]).read().split()
a = [json.loads(l) for l in open(sys.argv[2])]
b = [json.loads(l) for l in open(sys.argv[3])]
assert [x["input"] for x in a] == files and len(b) == len(files), (len(a), len(b))
for x, y in zip(a, b):
    assert [t["index"] for t in x["top"]] == [t["index"] for t in y["top"]], (x, y)
    assert all(abs(s["p"] - t["p"]) < 1e-6 for s, t in zip(x["top"], y["top"])), (x, y)
EOF
expect_ok -- "$G" predict "$T/job.yaml" --checkpoint "$CK" --top 2 "$T"/new/*.png
check "new images: top-1 their colour, 2 classes each, named, probabilities descending in [0, 1]" \
    "$PY" - "$OUT" <<'EOF'
import json, os, sys
for l in open(sys.argv[1]):
    x = json.loads(l)
    want = os.path.basename(x["input"])[:-5]
    assert len(x["top"]) == 2 and x["top"][0]["class"] == want, x
    assert 1 >= x["top"][0]["p"] >= x["top"][1]["p"] >= 0 and x["top"][0]["p"] > 0.5, x
    assert {t["class"] for t in x["top"]} <= {"blue", "green", "red"}, x
EOF

# ---- a split: the figures `gpurun eval` scores
expect_ok -- "$G" eval "$T/job.yaml" --checkpoint "$CK"
cp "$OUT" "$T/eval.json"
expect_ok -- "$G" predict "$T/job.yaml" --checkpoint "$CK" --top 3 "$T/c.h5:/val"
check "a split: every sample, its label; mean -log p[label] and top-1 accuracy are eval's" \
    "$PY" - "$OUT" "$T/eval.json" "$T/c.h5" <<'EOF'
import json, math, sys, h5py
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = json.load(open(sys.argv[2]))
labels = list(h5py.File(sys.argv[3], "r")["val/labels"][:])
assert [x["index"] for x in lines] == list(range(len(labels))) == list(range(ev["samples"])), len(lines)
assert [x["label"] for x in lines] == labels, lines[0]
loss = sum(-math.log(next(t["p"] for t in x["top"] if t["index"] == x["label"])) for x in lines) / len(lines)
acc = sum(x["top"][0]["index"] == x["label"] for x in lines) / len(lines)
assert abs(loss - ev["loss"]) < 1e-4 * max(1, ev["loss"]) and abs(acc - ev["accuracy"]) < 1e-9, (loss, acc, ev)
EOF
expect_ok '"top":[{"class":"' -- "$G" predict "$T/job.yaml" --checkpoint "$T/run/weights.h5" "$T/new/red0.png"
check "the final weights.h5: the last checkpoint's probabilities" bash -c "
    '$G' predict '$T/job.yaml' --checkpoint '$CK' '$T/new/red0.png' | cmp -s - '$OUT'"

# ---- errors
expect 2 "predict: --checkpoint PATH (a checkpoint or a run's weights.h5) is required" -- \
    "$G" predict "$T/job.yaml" "$T/new/red0.png"
expect 2 "predict: expected inputs: image files or FILE.h5[:GROUP]" -- "$G" predict "$T/job.yaml" --checkpoint "$CK"
expect 2 "--top: expected a count from 1 to 100, got '0'" -- \
    "$G" predict "$T/job.yaml" --checkpoint "$CK" --top 0 "$T/new/red0.png"
expect 3 "$T/notimage.png" -- "$G" predict "$T/job.yaml" --checkpoint "$CK" "$T/notimage.png"
expect 3 "$T/nosuch.png" -- "$G" predict "$T/job.yaml" --checkpoint "$CK" "$T/nosuch.png"
expect_ok "wrote $T/big.h5" -- "$G" data imagefolder "$T/big.h5" --from "$T/folder" --size 10
expect 3 "$T/big.h5:/train: samples of 3x10x10; the model takes 3x8x8" -- \
    "$G" predict "$T/job.yaml" --checkpoint "$CK" "$T/big.h5:/train"
expect 3 "$T/c.h5" "/nosuch" -- "$G" predict "$T/job.yaml" --checkpoint "$CK" "$T/c.h5:/nosuch"

e2e_done
