#!/usr/bin/env bash
# e2e_imagenet.sh — `gpurun data imagenet` on the command line (DESIGN 1.1,
# 1.5): option errors exit 2 naming the option, a tree without train/ exit 3
# naming what was looked for; a conversion of a small fake ILSVRC2012 tree
# (Kaggle's flat val with LOC_val_solution.csv) stopped by SIGINT keeps its
# committed block in OUT.partial and says so in its one line (exit 75);
# another conversion is then refused naming --restart (exit 2); the same
# command goes on from there ("resuming: 512 of 1,104 files done") and
# writes what an uninterrupted conversion writes (compared with h5py when
# /usr/bin/python3 has it); --restart discards a stopped conversion's work.
# GPURUN_DATA_BLOCK_DELAY_MS holds the conversion a minute after each block, so
# the signal lands after the first however loaded the machine (a 5 s hold was
# outrun once under ctest -j4 on 2 cores). The layouts and errors themselves are
# test_convert_imagenet's, the resume's details test_convert_resume's.
#
#   bash tests/e2e_imagenet.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

# a 12x8 RGB JPEG (libjpeg, quality 80)
JPEG=/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQFxQYGBcUFhYaHSUfGhsjHBYWICwgIyYnKSopGR8tMC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCj/wAARCAAIAAwDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDz74P/APLD8K+vfDP/ACCIaKK2Mj//2Q==
D=$T/kaggle
C=$D/ILSVRC/Data/CLS-LOC
mkdir -p "$C/train/n01440764" "$C/train/n01443537" "$C/val"
echo "$JPEG" | base64 -d >"$T/one.jpg"
# 1100 train images (blocks of 512, 512, 76), 4 flat val images: copies written by one tee
files=()
for i in $(seq -w 0 549); do files+=("$C/train/n01440764/a_$i.JPEG" "$C/train/n01443537/b_$i.JPEG"); done
for i in 1 2 3 4; do files+=("$C/val/ILSVRC2012_val_0000000$i.JPEG"); done
tee "${files[@]}" <"$T/one.jpg" >/dev/null
printf 'ImageId,PredictionString\r\n' >"$D/LOC_val_solution.csv"
for i in 1 2 3 4; do
    w=n01440764; [ $((i % 2)) -eq 0 ] && w=n01443537
    printf 'ILSVRC2012_val_0000000%d,%s 1 2 11 7 %s 0 0 4 4\r\n' "$i" "$w" "$w" >>"$D/LOC_val_solution.csv"
done
printf 'n01440764 tench, Tinca tinca\nn01443537 goldfish, Carassius auratus\n' >"$D/LOC_synset_mapping.txt"

O=$T/in.h5
expect 2 "data imagenet: --from DIR is required" -- "$G" data imagenet "$O"
expect 2 "data imagenet: --splits: expected train, val or train,val, got 'test'" -- \
    "$G" data imagenet "$O" --from "$D" --splits test
expect 2 "data imagenet: --size does not apply with --store jpeg" -- "$G" data imagenet "$O" --from "$D" --size 8
expect 2 "data imagenet: --from DIR and --size S are required for --store raw" -- \
    "$G" data imagenet "$O" --from "$D" --store raw
expect 2 "data imagenet: --restart applies only with --store jpeg (a raw conversion is not resumable)" -- \
    "$G" data imagenet "$O" --from "$D" --store raw --size 8 --restart
expect 2 "data csv: option --restart does not apply" -- "$G" data csv "$O" --from x.csv --target y --restart
mkdir -p "$T/empty"
expect 3 "$T/empty: no train folder (looked for $T/empty/train and Kaggle's" -- \
    "$G" data imagenet "$O" --from "$T/empty"
check "no output after the errors" test ! -e "$O" -a ! -e "$O.partial"

# stopped(OUT): runs the conversion to OUT with the block delay, SIGINT once block 1 is committed
# (its progress said): exit code in RC, stderr in $T/stop.err
stopped() {
    local out=$1 i pid
    shift
    : >"$T/stop.err"
    set -m # a job of its own: SIGINT is not ignored in it, as it is in a background job of a script
    GPURUN_DATA_BLOCK_DELAY_MS=60000 "$G" data imagenet "$out" --from "$D" "$@" >/dev/null 2>"$T/stop.err" &
    pid=$!
    set +m
    for ((i = 0; i < 1200; i++)); do
        tr '\r' '\n' <"$T/stop.err" | grep -q " 512/1100" && break
        sleep 0.05
    done
    kill -INT "$pid"
    wait "$pid"
    RC=$?
}
stopped "$O"
check "SIGINT: exit 75" test "$RC" -eq 75
check "SIGINT: one line says what is kept" grep -qxF "gpurun: data: stopped by SIGINT; $O not written, its temporary \
removed; 512 files converted so far are kept in $O.partial: run the same command again to continue" "$T/stop.err"
check "SIGINT: OUT.partial kept, OUT not written" test -d "$O.partial" -a ! -e "$O"
expect 2 "$O.partial: holds 512 files converted by another conversion" "add --restart to discard it" -- \
    "$G" data imagenet "$O" --from "$D" --max-side 8
expect_ok "wrote $O" -- "$G" data imagenet "$O" --from "$D"
check "the same command resumes" grep -qF "gpurun data: $O: resuming: 512 of 1,104 files done (kept in $O.partial)" \
    "$ERR"
check "OUT.partial removed once OUT is written" test ! -e "$O.partial"
R=$T/ref.h5
expect_ok "wrote $R" -- "$G" data imagenet "$R" --from "$D"
why=$(e2e_lacks h5py numpy)
if [ -z "$why" ]; then
    check "the resumed file holds what the uninterrupted one does" "$PY" - "$O" "$R" <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
for g in ("/train", "/val"):
    for d in ("encoded", "offsets", "shapes", "formats", "labels"):
        assert np.array_equal(a[g][d][()], b[g][d][()]), (g, d)
    names = ["tench, Tinca tinca", "goldfish, Carassius auratus"]
    assert list(a[g].attrs["classes"]) == list(b[g].attrs["classes"]) == names
assert list(a["/val/labels"][()]) == [0, 1, 0, 1] and a["/train/labels"].shape == (1100,)
EOF
else e2e_skip "the resumed file against the uninterrupted one: $why"; fi

# --restart: a stopped conversion's work discarded, said, and the conversion done whole
O2=$T/re.h5
stopped "$O2"
check "second stop: exit 75" test "$RC" -eq 75
expect_ok "wrote $O2" -- "$G" data imagenet "$O2" --from "$D" --max-side 8 --restart
check "--restart says what it discards" \
    grep -qF -- "--restart: discarding the 512 files converted in $O2.partial" "$ERR"
check "--restart: OUT.partial removed" test ! -e "$O2.partial"
e2e_done
