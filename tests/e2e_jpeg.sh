#!/usr/bin/env bash
# e2e_jpeg.sh — `gpurun data imagefolder --store jpeg` on the command line
# (DESIGN 1.1, 1.4, 1.5): its option errors exit 2 naming the option, a
# conversion writes an encoded image split, and a job trains and evaluates
# from one: `gpurun plan` says [3, S, S] from data.augment.crop.size; the
# losses are the same with 1 and 2 loader workers and across a --resume; a
# missing crop size is exit 2 naming the key; a damaged JPEG is exit 3 naming
# the file, the dataset and the sample, or under data.on_error: skip is
# replaced and counted, the same with 1 and 2 workers; predict scores image files
# as the job's evaluation makes them; a slow data path is said. The round
# trip itself is test_convert_imagefolder_encoded's. No Python needed.
#
#   bash tests/e2e_jpeg.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

# a 12x8 RGB JPEG (libjpeg, quality 80), in two class folders
JPEG=/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQFxQYGBcUFhYaHSUfGhsjHBYWICwgIyYnKSopGR8tMC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCj/wAARCAAIAAwDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDz74P/APLD8K+vfDP/ACCIaKK2Mj//2Q==
mkdir -p "$T/pics/a" "$T/pics/b"
for c in a b; do for i in 1 2 3; do echo "$JPEG" | base64 -d >"$T/pics/$c/$i.jpg"; done; done
mkdir -p "$T/pics2/a" "$T/pics2/b"
for c in a b; do for i in 1 2 3 4; do echo "$JPEG" | base64 -d >"$T/pics2/$c/$i.jpg"; done; done
I=$T/enc.h5

expect_fail 2 "--store: expected raw or jpeg, got 'webp'" -- "$G" data imagefolder "$I" --from "$T/pics" --store webp
expect_fail 2 "--max-side applies only with --store jpeg" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --size 8 --max-side 64
expect_fail 2 "--quality applies only with --store jpeg" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --size 8 --quality 80
expect_fail 2 "--size does not apply with --store jpeg" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --size 8
expect_fail 2 "--quality: expected a JPEG quality 1..100, got '0'" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --quality 0
expect_fail 2 "--max-side: expected a count >= 1, got '0'" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --max-side 0
expect_fail 2 "--max-side: expected 1..32768" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --max-side 40000
check "no output after option errors" test ! -e "$I"

expect_ok "wrote $I" -- "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --max-side 8 --quality 85
# training from it: 8 images, 2 of them val, 32x32 resized crops
J=$T/enc2.h5
expect_ok "wrote $J" -- "$G" data imagefolder "$J" --from "$T/pics2" --store jpeg --val-fraction 0.25
AUG='{crop: {size: 32, type: resized}, flip: true}'
job() { # job FILE WORKERS [AUGMENT]
    local aug=${3:-$AUG}
    {
        echo "name: enc"
        echo "data:"
        echo "  train: {path: $J, group: /train}"
        echo "  val: {path: $J, group: /val}"
        echo "  workers: $2"
        echo "  augment: $aug"
        echo "model:"
        echo "  layers: [{conv: {filters: 4, kernel: 3}}, relu, flatten, {dense: {units: 2}}]"
        echo "train: {batch_size: 2, steps: 8, optimizer: {type: sgd, lr: 0.01}}"
        echo "log: {every_steps: 1}"
        echo "checkpoint: {every_steps: 4}"
    } >"$1"
}
losses() { grep '"kind":"train"' "$1/metrics.jsonl" | sed 's/.*"step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/'; }
job "$T/w2.yaml" 2
job "$T/w1.yaml" 1
# the runs compared bit for bit take one compute thread: a fresh run's default leaves out the cores other
# work keeps busy as it starts (runner/job.c), and the rounding follows the thread count
expect_ok "[2, 3, 32, 32]" -- "$G" plan "$T/w2.yaml"
expect_ok "done: 8 steps" -- "$G" "$T/w2.yaml" --run-dir "$T/r2" --threads 1
expect_ok "done: 8 steps" -- "$G" "$T/w1.yaml" --run-dir "$T/r1" --threads 1
losses "$T/r2" >"$T/l2"
losses "$T/r1" >"$T/l1"
check "8 finite losses" test "$(grep -cE '^[0-9]+ -?[0-9.]+(e[-+]?[0-9]+)?$' "$T/l2")" -eq 8
check "the same losses with 1 and 2 loader workers" cmp "$T/l1" "$T/l2"
check "val evaluated" grep -q '"split":"val"' "$T/r2/metrics.jsonl"
expect_ok "done: this attempt 4 steps (5-8)" -- \
    "$G" "$T/w2.yaml" --run-dir "$T/r3" --resume "$T/r2/checkpoints/step-000000004.h5"
losses "$T/r3" >"$T/l3"
check "the same losses after a resume from step 4" cmp "$T/l3" <(sed -n '5,8p' "$T/l2")

# a data path that cannot keep up is said once, after the first line: a loader held 100 ms a batch
# (GPURUN_LOADER_DELAY_MS) for a model that only averages its 32x32 crops
{
    echo "name: slowdata"
    echo "data: {train: {path: $J, group: /train}, workers: 1, prefetch: 1, augment: {crop: {size: 32, type: resized}}}"
    echo "model: {layers: [global_avgpool, flatten, {dense: {units: 2}}]}"
    echo "train: {batch_size: 6, steps: 9, optimizer: {type: sgd, lr: 0.01}}"
    echo "log: {every_steps: 3}"
} >"$T/slow.yaml"
expect 0 "gpurun: warning: the training step waited for its batches" "data.workers 1" "does not keep up" -- \
    env GPURUN_LOADER_DELAY_MS=100 "$G" "$T/slow.yaml" --run-dir "$T/rslow"
check "said once" test "$(grep -c 'waited for its batches' "$ERR")" -eq 1
# the first line's window holds the loader's start: not judged (one line only here, its wait as high)
sed 's/steps: 9/steps: 3/' "$T/slow.yaml" >"$T/slow1.yaml"
expect 0 -- env GPURUN_LOADER_DELAY_MS=100 "$G" "$T/slow1.yaml" --run-dir "$T/rslow1"
check "not said from the first line alone" bash -c "! grep -q 'waited for its batches' '$ERR'"
check "the first line's wait was high all the same" grep -qE '"data_wait_pct":([5-9][0-9]|100)' "$T/rslow1/metrics.jsonl"

# data.decode: gpu needs a CUDA device (device cpu: exit 2 at the key); cpu decodes on the host, said
expect_fail 2 "data.decode" "gpu needs a CUDA device, and device is cpu" -- \
    "$G" plan "$T/w2.yaml" --set data.decode=gpu --set device=cpu
expect_fail 2 "data.decode" "gpu needs a CUDA device, and device is cpu" -- \
    "$G" "$T/w2.yaml" --run-dir "$T/rg" --set data.decode=gpu --set device=cpu
expect 0 "decoding JPEGs on the host (2 loader workers) (data.decode cpu)" -- \
    "$G" "$T/w2.yaml" --run-dir "$T/rc" --set data.decode=cpu --set device=cpu --set train.steps=2
# data.workers auto: a JPEG split keeps its 2 loader threads on the cpu (a split of pixels gets none: e2e_errors)
expect_ok "data: 2 loader threads (data.workers auto)" -- "$G" plan "$T/w2.yaml" --set device=cpu --set data.workers=auto

job "$T/nocrop.yaml" 2 "{flip: true}"
expect_fail 2 "data.augment.crop.size" "required" "is an encoded image split" -- "$G" plan "$T/nocrop.yaml"
job "$T/random.yaml" 2 "{crop: {size: 8, padding: 2}}"
expect_fail 2 "data.augment.crop.type" "must be resized" -- "$G" "$T/random.yaml" --run-dir "$T/rr"
# predict: an image file is made what the job's evaluation makes of a sample (short side
# round(32 * 256 / 224) = 37, centre 32 x 32), so it scores as the same JPEG in the val split does
CK=$T/r2/checkpoints/step-000000008.h5
expect_ok '"input":"'"$T/pics2/a/1.jpg"'"' -- "$G" predict "$T/w2.yaml" --checkpoint "$CK" "$T/pics2/a/1.jpg"
sed 's/.*"top"//' "$OUT" >"$T/pf"
expect_ok '"input":"'"$J:/val"'","index":0' -- "$G" predict "$T/w2.yaml" --checkpoint "$CK" "$J:/val"
head -n 1 "$OUT" | sed 's/.*"top"//' >"$T/ps"
check "predict: a file scores as the same JPEG in the encoded val split" cmp "$T/pf" "$T/ps"
expect_ok "wrote $T/other.h5" -- "$G" data imagefolder "$T/other.h5" --from "$T/pics" --size 8 --group /train
expect_fail 3 "but the job trained from an encoded image one" -- \
    "$G" predict "$T/w2.yaml" --checkpoint "$CK" "$T/other.h5:/train"

# a JPEG damaged after conversion: the first sample's bytes, past its SOI marker
cp "$J" "$T/bad.h5"
off=$(LC_ALL=C grep -obUaP '\xff\xd8\xff' "$T/bad.h5" | head -n 1 | cut -d: -f1)
printf '%064d' 0 | dd of="$T/bad.h5" bs=1 seek=$((off + 2)) conv=notrunc 2>/dev/null
sed "s|$J|$T/bad.h5|" "$T/w2.yaml" >"$T/bad.yaml"
expect_fail 3 "$T/bad.h5: /train/encoded: sample " ": cannot decode: " -- "$G" "$T/bad.yaml" --run-dir "$T/rb"
# data.on_error skip: the next sample in file order takes its place, counted, the same with 1 and 2 workers
sed 's|^  workers: 2|  workers: 2\n  on_error: skip|' "$T/bad.yaml" >"$T/skip2.yaml"
sed 's|^  workers: 2|  workers: 1\n  on_error: skip|' "$T/bad.yaml" >"$T/skip1.yaml"
expect 0 "data.on_error skip: $T/bad.h5: /train/encoded: sample " "took its place" -- \
    "$G" "$T/skip2.yaml" --run-dir "$T/rs2" --threads 1
expect_ok "done: 8 steps" -- "$G" "$T/skip1.yaml" --run-dir "$T/rs1" --threads 1
losses "$T/rs2" >"$T/ls2"
losses "$T/rs1" >"$T/ls1"
check "8 losses with a damaged sample skipped" test "$(wc -l <"$T/ls2")" -eq 8
check "skipping: the same losses with 1 and 2 loader workers" cmp "$T/ls1" "$T/ls2"
check "skipping changes the batches that held the damaged sample" bash -c "! cmp -s '$T/ls2' '$T/l2'"
check "summary.json counts the skipped samples" grep -qE '"data_skipped":[1-9]' "$T/rs2/summary.json"
check "an undamaged run skips none" grep -q '"data_skipped":0' "$T/r2/summary.json"
e2e_done
