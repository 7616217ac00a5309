#!/usr/bin/env bash
# e2e_data.sh — the `gpurun data` converters on the command line (DESIGN 1.1,
# 1.2, 1.5): usage errors exit 2, data errors exit 3 naming the file, a failed
# conversion leaves neither OUT nor OUT.tmp, and small conversions that
# succeed are read back with h5py (an independent reader). Sizes the layout
# cannot hold are exit 2 with the arguments (issue 30 item 6); a conversion
# stopped by SIGTERM exits 75 and removes its temporary, an existing OUT left
# as it was; a SIGKILLed one's temporary is kept while it lives and removed
# by the next conversion (item 5).
#
#   bash tests/e2e_data.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Tiny inputs only, but for the stopped conversions (signalled as soon as
# their temporary exists, each waited for at most 120 s): runs in seconds.
# Prints `N passed, M failed` last and exits non-zero when M > 0.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

# want CODE OUT TEXT... -- CMD...
# Runs CMD; passes when it exits CODE and stderr holds every TEXT (fixed
# strings). When CODE is not 0 and OUT is not "-", OUT and OUT.tmp must not
# exist afterwards.
want() {
    local code=$1 out=$2 texts=() why="" t
    shift 2
    while [ "$1" != "--" ]; do texts+=("$1"); shift; done
    shift
    timeout 120 "$@" >"$T/stdout" 2>"$T/stderr"
    local rc=$?
    [ "$rc" -eq "$code" ] || why="exit code $rc, expected $code"
    for t in "${texts[@]}"; do
        grep -qF -- "$t" "$T/stderr" || why="${why:+$why; }stderr lacks '$t'"
    done
    if [ "$code" -ne 0 ] && [ "$out" != - ] && { [ -e "$out" ] || [ -e "$out.tmp" ]; }; then
        why="${why:+$why; }$out or $out.tmp left behind"
    fi
    grep -qF "HDF5-DIAG" "$T/stderr" && why="${why:+$why; }HDF5 error stack printed"
    if [ -z "$why" ]; then
        PASS=$((PASS + 1))
    else
        FAIL=$((FAIL + 1))
        echo "FAIL: $*"
        echo "      $why"
        head -c 400 "$T/stderr" | sed 's/^/      stderr: /'
    fi
}

# py DESCRIPTION SCRIPT ARGS... : passes when the Python script exits 0
py() {
    local desc=$1
    shift
    if "$PY" - "$@" >"$T/py.out" 2>&1; then PASS=$((PASS + 1)); else
        FAIL=$((FAIL + 1))
        echo "FAIL: $desc"
        sed 's/^/      /' "$T/py.out" | head -20
    fi
}

S=$T/s.h5
# ---------------------------------------------------------------- usage errors: exit 2
want 2 - "data: expected a dataset name and an output file" "see 'gpurun data --help'" -- "$G" data synthetic
want 2 "$S" "--n N and --shape C,H,W are required" -- "$G" data synthetic "$S" --shape 3,8,8
want 2 "$S" "--n must be in [1, " -- "$G" data synthetic "$S" --n 0 --shape 3,8,8
want 2 "$S" "--n: expected an integer, got 'ten'" -- "$G" data synthetic "$S" --n ten --shape 3,8,8
want 2 "$S" "--shape: expected C,H,W, got '3,8'" -- "$G" data synthetic "$S" --n 10 --shape 3,8
want 2 "$S" "each of C,H,W must be in [1, 65536]" -- "$G" data synthetic "$S" --n 10 --shape 3,0,8
want 2 "$S" "--classes must be in [2, 65536], got 1" -- "$G" data synthetic "$S" --n 10 --shape 3,8,8 --classes 1
want 2 "$S" "--test: expected a count >= 1, got '0'" -- "$G" data synthetic "$S" --n 10 --shape 3,8,8 --test 0
want 2 "$S" "--seed: expected a non-negative integer" -- "$G" data synthetic "$S" --n 10 --shape 3,8,8 --seed -1
want 2 "$S" "data synthetic: option --from does not apply" -- "$G" data synthetic "$S" --n 10 --shape 3,8,8 --from .
want 2 "$S" "--shape: expected a value" -- "$G" data synthetic "$S" --n 10 --shape
want 2 "$T/c.h5" "data cifar10: --from DIR" -- "$G" data cifar10 "$T/c.h5"
want 2 "$T/c.h5" "data cifar10: option --size does not apply" -- "$G" data cifar10 "$T/c.h5" --from . --size 8
want 2 "$T/i.h5" "--from DIR and --size S are required" -- "$G" data imagefolder "$T/i.h5" --from .
want 2 "$T/i.h5" "--short-side must be in [--size 8, 65536], got 4" -- \
    "$G" data imagefolder "$T/i.h5" --from . --size 8 --short-side 4
want 2 "$T/i.h5" "--short-side: expected a count >= 1, got '0'" -- \
    "$G" data imagefolder "$T/i.h5" --from . --size 8 --short-side 0
want 2 "$T/i.h5" "--group must be an absolute HDF5 path" -- "$G" data imagefolder "$T/i.h5" --from . --size 8 --group val
want 2 "$T/i.h5" "unknown dataset 'coco'" -- "$G" data coco "$T/i.h5"

# ---------------------------------------------------------------- data errors: exit 3 naming the file
want 3 "$T/c.h5" "$T/none: no such directory" -- "$G" data cifar10 "$T/c.h5" --from "$T/none"
want 3 "$T/i.h5" "$T/none: no such directory" -- "$G" data imagefolder "$T/i.h5" --from "$T/none" --size 8
mkdir -p "$T/cifar_empty" "$T/folder_empty" "$T/folder_bad/cat"
want 3 "$T/c.h5" "$T/cifar_empty/data_batch_1.bin: no such file" -- "$G" data cifar10 "$T/c.h5" --from "$T/cifar_empty"
head -c 3000 /dev/zero >"$T/cifar_empty/data_batch_1.bin"
want 3 "$T/c.h5" "$T/cifar_empty/data_batch_1.bin: size 3000 is not a multiple of 3073 bytes" -- \
    "$G" data cifar10 "$T/c.h5" --from "$T/cifar_empty"
want 3 "$T/i.h5" "$T/folder_empty: no class sub-folders" -- "$G" data imagefolder "$T/i.h5" --from "$T/folder_empty" --size 8
printf 'not a png' >"$T/folder_bad/cat/x.png"
want 3 "$T/i.h5" "$T/folder_bad/cat/x.png: cannot decode: not a JPEG or PNG file (it starts with 6E 6F 74 20)" -- \
    "$G" data imagefolder "$T/i.h5" --from "$T/folder_bad" --size 8

# inputs that are not regular files: exit 3 at once, naming the file (a FIFO would block a reader
# forever; want's own timeout turns a block into a failure)
mkdir -p "$T/idx_fifo" "$T/cifar_fifo" "$T/cifar_dev" "$T/cifar_dir/data_batch_1.bin" "$T/folder_fifo/cat"
mkfifo "$T/idx_fifo/train-images-idx3-ubyte" "$T/cifar_fifo/data_batch_1.bin" "$T/folder_fifo/cat/a.png"
ln -s /dev/zero "$T/cifar_dev/data_batch_1.bin"
for kind in mnist fashion-mnist; do
    want 3 "$T/f.h5" "$T/idx_fifo/train-images-idx3-ubyte: an IDX file is a FIFO, not a regular file" -- \
        "$G" data "$kind" "$T/f.h5" --from "$T/idx_fifo"
done
want 3 "$T/c.h5" "$T/cifar_fifo/data_batch_1.bin: a CIFAR-10 batch file is a FIFO, not a regular file" -- \
    "$G" data cifar10 "$T/c.h5" --from "$T/cifar_fifo"
want 3 "$T/c.h5" "$T/cifar_dev/data_batch_1.bin: a CIFAR-10 batch file is a character device" -- \
    "$G" data cifar10 "$T/c.h5" --from "$T/cifar_dev"
want 3 "$T/c.h5" "$T/cifar_dir/data_batch_1.bin: a CIFAR-10 batch file is a directory" -- \
    "$G" data cifar10 "$T/c.h5" --from "$T/cifar_dir"
want 3 "$T/i.h5" "$T/folder_fifo/cat/a.png: an image is a FIFO, not a regular file" -- \
    "$G" data imagefolder "$T/i.h5" --from "$T/folder_fifo" --size 8

# ---------------------------------------------------------------- conversions that succeed
want 0 - "/train" "100%" -- "$G" data synthetic "$S" --n 50 --shape 3,8,8 --classes 4 --seed 2
grep -qF "wrote $S" "$T/stdout" && PASS=$((PASS + 1)) || { FAIL=$((FAIL + 1)); echo "FAIL: stdout lacks 'wrote $S'"; }
want 2 - "$S: already exists (pass --force to overwrite)" -- "$G" data synthetic "$S" --n 50 --shape 3,8,8
want 0 - -- "$G" data synthetic "$T/s2.h5" --n 70 --shape 3,8,8 --classes 4 --seed 2 --test 5
py "synthetic: shapes, labels, attributes; the same seed gives the same test split" "$S" "$T/s2.h5" <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert a["train/images"].shape == (50, 3, 8, 8) and a["train/images"].dtype == np.uint8, a["train/images"]
assert a["test/images"].shape == (5, 3, 8, 8), a["test/images"]  # ceil(50 / 10)
assert a["train/labels"].shape == (50,) and a["train/labels"][:].max() < 4
assert len(a["train"].attrs["mean"]) == 3 and len(a["test"].attrs["std"]) == 3
assert np.array_equal(a["test/images"][:], b["test/images"][:])
assert np.array_equal(a["train/images"][:], b["train/images"][:50])
EOF
# a folder of PNG files written by Python's zlib (no imaging library needed)
mkdir -p "$T/folder/b" "$T/folder/a"
py "write PNG fixtures" "$T/folder" <<'EOF'
import sys, struct, zlib
def png(path, w, h, rgb):
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + bytes(rgb) * w for _ in range(h))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
png(sys.argv[1] + "/a/1.png", 12, 10, (250, 0, 0))
png(sys.argv[1] + "/a/2.PNG", 10, 14, (0, 250, 0))
png(sys.argv[1] + "/b/3.png", 9, 9, (0, 0, 250))
open(sys.argv[1] + "/b/notes.txt", "w").write("skipped")
EOF
want 0 - "skipped 1 files that are not JPEG or PNG" -- "$G" data imagefolder "$T/i.h5" --from "$T/folder" --size 6
py "imagefolder: shapes, labels, classes, colours" "$T/i.h5" <<'EOF'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
x, y = f["train/images"][:], f["train/labels"][:]
assert x.shape == (3, 3, 6, 6) and x.dtype == np.uint8, x.shape
assert list(y) == [0, 0, 1], y
assert [c.decode() if isinstance(c, bytes) else c for c in f["train"].attrs["classes"]] == ["a", "b"]
for i, c in enumerate([0, 1, 2]):
    assert (x[i, c] == 250).all() and (np.delete(x[i], c, axis=0) == 0).all(), (i, x[i])
EOF

# ---------------------------------------------------------------- files that do not decode: --on-error fail|skip
want 2 "$T/m.h5" "data imagefolder: --on-error: expected skip or fail, got 'maybe'" -- \
    "$G" data imagefolder "$T/m.h5" --from "$T/folder" --size 6 --on-error maybe
want 2 "$T/m.h5" "--on-error: expected a value" -- "$G" data imagefolder "$T/m.h5" --from "$T/folder" --size 6 --on-error
want 2 "$T/s3.h5" "data synthetic: option --on-error does not apply" -- \
    "$G" data synthetic "$T/s3.h5" --n 10 --shape 3,8,8 --on-error skip
# a PNG named .JPEG (converts: the first bytes tell the format), garbage named
# .jpg, a JPEG header claiming 65500x65500 over a few bytes of data
mkdir -p "$T/mixed/a" "$T/mixed/b"
cp "$T/folder/a/1.png" "$T/mixed/a/1.png"
cp "$T/folder/a/2.PNG" "$T/mixed/a/2.JPEG"
printf 'GIF89a garbage' >"$T/mixed/a/3.jpg"
cp "$T/folder/b/3.png" "$T/mixed/b/4.png"
py "write a JPEG header claiming 65500x65500" "$T/mixed/b/5.jpg" <<'EOF'
import sys
sof = bytes([0xFF, 0xC0, 0, 17, 8, 0xFF, 0xDC, 0xFF, 0xDC, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1])
sos = bytes([0xFF, 0xDA, 0, 12, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0])
open(sys.argv[1], "wb").write(b"\xff\xd8" + sof + sos + b"\x12\x34" * 8 + b"\xff\xd9")
EOF
for policy in "" "--on-error fail"; do
    # shellcheck disable=SC2086 # $policy is zero or two words
    want 3 "$T/m.h5" "$T/mixed/a/3.jpg: cannot decode: not a JPEG or PNG file (it starts with 47 49 46 38)" \
        "(--on-error skip leaves such files out)" -- "$G" data imagefolder "$T/m.h5" --from "$T/mixed" --size 6 $policy
done
rm "$T/mixed/a/3.jpg"
want 3 "$T/m.h5" "$T/mixed/b/5.jpg: cannot decode: JPEG: header claims 65500x65500 pixels, more than this converter" \
    -- "$G" data imagefolder "$T/m.h5" --from "$T/mixed" --size 6
printf 'GIF89a garbage' >"$T/mixed/a/3.jpg"
want 0 - "skipped $T/mixed/a/3.jpg: not a JPEG or PNG file (it starts with 47 49 46 38)" \
    "skipped $T/mixed/b/5.jpg: JPEG: header claims 65500x65500 pixels" \
    "skipped 2 images that could not be decoded (--on-error skip); 3 samples written" -- \
    "$G" data imagefolder "$T/m.h5" --from "$T/mixed" --size 6 --on-error skip
py "imagefolder --on-error skip: the three that decode, with their labels" "$T/m.h5" <<'EOF'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
x, y = f["train/images"][:], f["train/labels"][:]
assert x.shape == (3, 3, 6, 6), x.shape
assert list(y) == [0, 0, 1], y
for i, c in enumerate([0, 1, 2]):  # 1.png red, 2.JPEG (a PNG) green, 4.png blue
    assert (x[i, c] == 250).all() and (np.delete(x[i], c, axis=0) == 0).all(), (i, x[i])
EOF


# ---------------------------------------------------------------- groups of one file: --group into an existing file
# class folders of solid PNGs: a 4, b 5, c 8, d 1 files; R = 50 * class, G = 10 * file number (over all
# files: which file a sample is), B = 99. pets_bad: the same plus a file that does not decode.
py "write the pets folders" "$T/pets" "$T/pets_bad" <<'EOF'
import sys, os, struct, zlib
def png(path, w, h, rgb):
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + bytes(rgb) * w for _ in range(h))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for root in sys.argv[1:]:
    k = 0
    for c, n in enumerate((4, 5, 8, 1)):
        os.makedirs("%s/%s" % (root, "abcd"[c]), exist_ok=True)
        for i in range(n):
            png("%s/%s/%02d.png" % (root, "abcd"[c], i), 7, 6, (50 * c, 10 * k, 99))
            k += 1
open(sys.argv[2] + "/b/zz.jpg", "wb").write(b"GIF89a garbage")
EOF
# same_h5 DESCRIPTION A.h5 GROUP_A B.h5 GROUP_B: the two groups hold the same images (bytes, dtype, shape,
# chunks), labels and attributes
same_h5() {
    py "$1" "$2" "$3" "$4" "$5" <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r")[sys.argv[2]], h5py.File(sys.argv[3], "r")[sys.argv[4]]
for k in ("images", "labels"):
    x, y = a[k], b[k]
    assert x.dtype == y.dtype and x.shape == y.shape and x.chunks == y.chunks, (k, x, y, x.chunks, y.chunks)
    assert x[()].tobytes() == y[()].tobytes(), k
assert sorted(a.attrs) == sorted(b.attrs) == ["classes", "mean", "std"], (list(a.attrs), list(b.attrs))
for k in a.attrs:
    assert a.attrs[k].dtype == b.attrs[k].dtype and np.array_equal(a.attrs[k], b.attrs[k]), k
EOF
}
# same_file DESCRIPTION A B: byte for byte
same_file() {
    if cmp -s "$2" "$3"; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); echo "FAIL: $1: $2 differs from $3"; fi
}
# no_tmp OUT: OUT.tmp is not there
no_tmp() {
    if [ ! -e "$1.tmp" ]; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); echo "FAIL: $1.tmp left behind"; fi
}
P=$T/pets.h5
want 0 - -- "$G" data imagefolder "$P" --from "$T/pets" --size 4
cp "$P" "$T/pets_train.h5"
# (a) /val into the file holding /train: both there, /train as it was
want 0 - "$P: keeping /train" -- "$G" data imagefolder "$P" --from "$T/pets" --size 3 --group /val
same_h5 "--group /val into a file with /train: /train unchanged" "$P" /train "$T/pets_train.h5" /train
py "--group /val into a file with /train: /val written, the two groups only" "$P" <<'EOF'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert sorted(f) == ["train", "val"], list(f)
assert f["val/images"].shape == (18, 3, 3, 3) and f["train/images"].shape == (18, 3, 4, 4)
EOF
# (b) /val again: exit 2 without --force, the file untouched; with --force /val replaced, /train kept
cp "$P" "$T/pets_both.h5"
want 2 - "$P: already has group /val; --force replaces it" -- \
    "$G" data imagefolder "$P" --from "$T/pets" --size 3 --group /val
same_file "--group /val again without --force: the file untouched" "$P" "$T/pets_both.h5"
want 0 - -- "$G" data imagefolder "$P" --from "$T/pets" --size 2 --group /val --force
same_h5 "--group /val --force: /train unchanged" "$P" /train "$T/pets_train.h5" /train
py "--group /val --force: /val replaced" "$P" <<'EOF'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert sorted(f) == ["train", "val"] and f["val/images"].shape == (18, 3, 2, 2), (list(f), f["val/images"])
EOF
# (c) conversions into an existing file that fail: exit 3 (2 for a bad option), the file byte for byte as it was
cp "$P" "$T/pets_both.h5"
want 3 - "$T/pets_bad/b/zz.jpg: cannot decode: not a JPEG or PNG file" -- \
    "$G" data imagefolder "$P" --from "$T/pets_bad" --size 4 --group /test --on-error fail
same_file "a failed conversion of a new group: the file untouched" "$P" "$T/pets_both.h5"
no_tmp "$P"
want 3 - "$T/pets_bad/b/zz.jpg: cannot decode" -- \
    "$G" data imagefolder "$P" --from "$T/pets_bad" --size 4 --group /val --force
same_file "a failed --force conversion: the file untouched" "$P" "$T/pets_both.h5"
no_tmp "$P"
want 2 - "--short-side must be in [--size 4, 65536], got 3" -- \
    "$G" data imagefolder "$P" --from "$T/pets" --size 4 --short-side 3 --group /test
same_file "a bad option: the file untouched" "$P" "$T/pets_both.h5"
want 3 - "$T/none: no such directory" -- "$G" data imagefolder "$P" --from "$T/none" --size 4 --group /val --force
same_file "a missing folder: the file untouched" "$P" "$T/pets_both.h5"
no_tmp "$P"
printf 'my notes\n' >"$T/notes.h5"
want 3 - "$T/notes.h5: exists and is not an HDF5 file; not writing into it" -- \
    "$G" data imagefolder "$T/notes.h5" --from "$T/pets" --size 4 --force
if grep -qx 'my notes' "$T/notes.h5"; then PASS=$((PASS + 1)); else
    FAIL=$((FAIL + 1))
    echo "FAIL: notes.h5 was changed"
fi
# another set of classes: written, with a warning naming both groups
mkdir -p "$T/pets_other/a" "$T/pets_other/b"
cp "$T/pets/a/00.png" "$T/pets_other/a/"
cp "$T/pets/b/00.png" "$T/pets_other/b/"
want 0 - "gpurun data: warning: $P: the classes of /test (written now) and of /train (kept) differ:" \
    "differ: 2 classes in the one, 4 in the other (class 2 is 'c'); a job that trains on the one and evaluates" \
    "gpurun data: warning: $P: the classes of /test (written now) and of /val (kept) differ" \
    -- "$G" data imagefolder "$P" --from "$T/pets_other" --size 4 --group /test
# the converters that write /train and /test together: --force replaces the whole file, and says so
want 2 - "$P: already exists (pass --force to overwrite); this converter writes the whole file" -- \
    "$G" data synthetic "$P" --n 10 --shape 3,4,4

# ---------------------------------------------------------------- --val-fraction: /train and /val in one pass
for run in 1:vf1 1:vf1b 2:vf2; do
    want 0 - "/train 14, /val 4 samples of 3x4x4 in 4 classes" -- \
        "$G" data imagefolder "$T/${run#*:}.h5" --from "$T/pets" --size 4 --val-fraction 0.25 --seed "${run%%:*}"
done
py "--val-fraction 0.25: disjoint, complete, stratified, the split of the spec; a pure function of the seed" \
    "$T/vf1.h5" "$T/vf1b.h5" "$T/vf2.h5" <<'EOF'
import sys, math, h5py, numpy as np
M = (1 << 64) - 1
def h64(key, ctr):  # common/gr_hd.h gr_hash64_hd
    z = (key * 0x9E3779B97F4A7C15 + ctr + 0x632BE59BD9B4E019) & M
    z = (z + 0x9E3779B97F4A7C15 * (ctr + 1)) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
def want_val(seed, counts):  # per class: Fisher-Yates of its files by name, the first k to /val
    out, first = set(), 0
    for c, m in enumerate(counts):
        idx, key = list(range(first, first + m)), h64(seed, c)
        for i in range(m - 1, 0, -1):
            j = h64(key, i) % (i + 1)
            idx[i], idx[j] = idx[j], idx[i]
        k = min(max(math.floor(0.25 * m + 0.5), 1 if m >= 2 else 0), m - 1)
        out |= set(idx[:k])
        first += m
    return out
counts = (4, 5, 8, 1)
def load(path):
    f = h5py.File(path, "r")
    t, v = f["train"], f["val"]
    ids = lambda g: [int(g["images"][i, 1, 0, 0]) // 10 for i in range(len(g["labels"]))]
    return f, t, v, ids(t), ids(v)
f, t, v, ti, vi = load(sys.argv[1])
assert sorted(f) == ["train", "val"], list(f)
assert not set(ti) & set(vi) and sorted(ti + vi) == list(range(18)), (ti, vi)
assert list(np.bincount(v["labels"][:], minlength=4)) == [1, 1, 2, 0], v["labels"][:]
assert list(np.bincount(t["labels"][:], minlength=4)) == [3, 4, 6, 1], t["labels"][:]
assert set(vi) == want_val(1, counts), (vi, want_val(1, counts))
assert ti == sorted(ti) and vi == sorted(vi)  # each split in file order
assert list(t.attrs["classes"]) == list(v.attrs["classes"]) and len(t.attrs["classes"]) == 4
x = t["images"][:].astype(np.float64)
assert np.allclose(t.attrs["mean"], x.mean(axis=(0, 2, 3)))  # of /train only
assert np.array_equal(v.attrs["mean"], t.attrs["mean"]) and np.array_equal(v.attrs["std"], t.attrs["std"])
g, t2, v2, _, _ = load(sys.argv[2])
for a, b in ((t, t2), (v, v2)):
    assert np.array_equal(a["labels"][:], b["labels"][:]) and a["images"][:].tobytes() == b["images"][:].tobytes()
_, _, _, ti3, vi3 = load(sys.argv[3])
assert set(vi3) == want_val(2, counts) and set(vi3) != set(vi), (vi3, vi)
EOF
# both groups there: --force for either; then the rules of an existing file
want 2 - "$T/vf1.h5: already has groups /train and /val; --force replaces them" -- \
    "$G" data imagefolder "$T/vf1.h5" --from "$T/pets" --size 4 --val-fraction 0.25
want 2 - "$P: already has groups /train and /val; --force replaces them" -- \
    "$G" data imagefolder "$P" --from "$T/pets" --size 4 --val-fraction 0.25
want 0 - -- "$G" data imagefolder "$T/vf1.h5" --from "$T/pets" --size 4 --val-fraction 0.5 --force
# (e) usage errors: exit 2, nothing written
for f in 0 1 -0.5 1.5 abc 0.5x nan; do
    want 2 "$T/vf3.h5" "data imagefolder: --val-fraction: expected a number in (0, 1)" -- \
        "$G" data imagefolder "$T/vf3.h5" --from "$T/pets" --size 4 --val-fraction "$f"
done
want 2 "$T/vf3.h5" "--group does not apply with --val-fraction" -- \
    "$G" data imagefolder "$T/vf3.h5" --from "$T/pets" --size 4 --val-fraction 0.2 --group /val
want 2 "$T/vf3.h5" "--seed applies only with --val-fraction" -- \
    "$G" data imagefolder "$T/vf3.h5" --from "$T/pets" --size 4 --seed 3
want 2 "$T/vf3.h5" "--seed: expected a non-negative integer" -- \
    "$G" data imagefolder "$T/vf3.h5" --from "$T/pets" --size 4 --val-fraction 0.2 --seed -3
want 2 "$T/s4.h5" "data synthetic: option --val-fraction does not apply" -- \
    "$G" data synthetic "$T/s4.h5" --n 10 --shape 3,4,4 --val-fraction 0.2
mkdir -p "$T/ones/a" "$T/ones/b"
cp "$T/pets/a/00.png" "$T/ones/a/"
cp "$T/pets/b/00.png" "$T/ones/b/"
want 3 "$T/vf3.h5" "$T/ones: --val-fraction 0.5 leaves /val empty" -- \
    "$G" data imagefolder "$T/vf3.h5" --from "$T/ones" --size 4 --val-fraction 0.5

# ---------------------------------------------------------------- layout limits: refused with the arguments
# 3 x S x S bytes per chunk: HDF5's chunk limit (4 GiB - 1) gives S <= 37837. Exit 2 at once, before the
# folder is read (it does not exist) or anything is written; an existing OUT untouched.
for s in 65536 37838; do
    want 2 "$T/big.h5" "data imagefolder: --size $s is too large: a 3-channel sample of ${s}x$s is over HDF5's 4 GiB chunk limit; the largest --size is 37837" -- \
        "$G" data imagefolder "$T/big.h5" --from "$T/none" --size "$s"
done
cp "$P" "$T/p_before_big.h5"
want 2 - "--size 65536 is too large" -- "$G" data imagefolder "$P" --from "$T/pets" --size 65536 --group /big --force
same_file "imagefolder --size 65536 leaves an existing file as it was" "$P" "$T/p_before_big.h5"
want 2 "$T/big.h5" "a sample of 1073774592 bytes is more than 1 GiB" -- \
    "$G" data synthetic "$T/big.h5" --n 1 --shape 1,32768,32769

# ---------------------------------------------------------------- stopped and killed conversions (issue 30 item 5)
# A conversion big enough to be caught mid-write: 100000 samples of 3x64x64 (1.2 GB were it to finish;
# each case signals it as soon as its temporary exists, so a few MB are written).
BIG=(--n 100000 --shape 3,64,64)
# tmps OUT: the temporaries of OUT, one a line
tmps() { ls -1 "$1".*.tmp 2>/dev/null; }
# start_big OUT [ARGS...]: the big conversion in the background (pid BIGPID, stderr $T/big.err); returns
# once its temporary exists (at most 120 s)
start_big() {
    local out=$1 i
    shift
    "$G" data synthetic "$out" "${BIG[@]}" "$@" 2>"$T/big.err" >/dev/null &
    BIGPID=$!
    for ((i = 0; i < 2400; i++)); do
        [ -n "$(tmps "$out")" ] && return 0
        kill -0 "$BIGPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "FAIL: start_big $out: no temporary appeared"
    return 1
}
# stop_big SIG: sends SIG to the big conversion; its exit code in BIGRC (at most 120 s, then SIGKILL)
stop_big() {
    local i
    kill -"$1" "$BIGPID" 2>/dev/null
    for ((i = 0; i < 2400; i++)); do
        kill -0 "$BIGPID" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$BIGPID" 2>/dev/null
    wait "$BIGPID" 2>/dev/null
    BIGRC=$?
}
# verdict DESCRIPTION WHY: passes when WHY is empty
verdict() {
    if [ -z "$2" ]; then PASS=$((PASS + 1)); else
        FAIL=$((FAIL + 1))
        echo "FAIL: $1"
        echo "      $2"
        tr '\r' '\n' <"$T/big.err" | tail -3 | sed 's/^/      stderr: /'
    fi
}
mkdir -p "$T/stop"
O=$T/stop/o.h5
# (a) SIGTERM, no OUT before: exit 75, one line saying so, no temporary, no OUT
why=""
if start_big "$O"; then
    stop_big TERM
    [ "$BIGRC" -eq 75 ] || why="exit code $BIGRC, expected 75"
    grep -qxF "gpurun: data: stopped by SIGTERM; $O not written, its temporary removed" "$T/big.err" ||
        why="${why:+$why; }stderr lacks the stop line"
    [ -z "$(tmps "$O")" ] || why="${why:+$why; }left $(tmps "$O")"
    [ ! -e "$O" ] || why="${why:+$why; }$O written"
else why="did not start"; fi
verdict "SIGTERM during a conversion: exit 75, its temporary removed" "$why"
# (b) SIGTERM with --force over an existing OUT: that file byte for byte as it was
want 0 - -- "$G" data synthetic "$O" --n 20 --shape 3,4,4
sum_before=$(sha256sum <"$O")
why=""
if start_big "$O" --force; then
    stop_big TERM
    [ "$BIGRC" -eq 75 ] || why="exit code $BIGRC, expected 75"
    grep -qxF "gpurun: data: stopped by SIGTERM; $O not written, its temporary removed (the existing file left as it was)" \
        "$T/big.err" || why="${why:+$why; }stderr lacks the stop line"
    [ -z "$(tmps "$O")" ] || why="${why:+$why; }left $(tmps "$O")"
    [ "$(sha256sum <"$O")" = "$sum_before" ] || why="${why:+$why; }$O changed"
else why="did not start"; fi
verdict "SIGTERM during a conversion over an existing OUT: exit 75, OUT as it was" "$why"
# (c) SIGKILL leaves its temporary; a live writer's temporary is kept by a conversion to the same OUT
# meanwhile; the next conversion once the writer is dead removes it and says so
rm -f "$O"
why=""
if start_big "$O"; then
    kill -STOP "$BIGPID" # alive, holding its temporary, writing no more
    live=$(tmps "$O")
    want 0 - -- "$G" data synthetic "$O" --n 20 --shape 3,4,4 --force
    grep -qF "stale temporary" "$T/stderr" && why="a live writer's temporary called stale"
    [ "$(tmps "$O")" = "$live" ] || why="${why:+$why; }the live writer's temporary $live touched"
    stop_big KILL
    [ "$(tmps "$O")" = "$live" ] || why="${why:+$why; }after SIGKILL: '$(tmps "$O")', expected $live"
    want 0 - "gpurun: removed a stale temporary $live left by an interrupted write" -- \
        "$G" data synthetic "$O" --n 20 --shape 3,4,4 --force
    [ -z "$(tmps "$O")" ] || why="${why:+$why; }left $(tmps "$O")"
else why="did not start"; fi
verdict "SIGKILL: the temporary kept while its writer lives, removed by the next conversion" "$why"

e2e_done
