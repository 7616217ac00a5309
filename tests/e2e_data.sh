#!/usr/bin/env bash
# e2e_data.sh — the `gpurun data` converters on the command line (DESIGN 1.1,
# 1.2, 1.5): usage errors exit 2, data errors exit 3 naming the file, a failed
# conversion leaves neither OUT nor OUT.tmp, and small conversions that
# succeed are read back with h5py (an independent reader).
#
#   bash tests/e2e_data.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Tiny inputs only: runs in a second or two. Prints `N passed, M failed` last
# and exits non-zero when M > 0.
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
want 2 "$T/i.h5" "unknown dataset 'imagenet'" -- "$G" data imagenet "$T/i.h5"

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

e2e_done
