#!/usr/bin/env bash
# e2e_text.sh — token datasets for language models (DESIGN 1.1, 1.4, 1.5): `gpurun data text`
# and `gpurun data tokens` on the command line, read back with h5py (an independent reader):
#  1. data text: the files' bytes concatenated are the tokens of /train then /val (the last
#     fraction F), uint16, vocab_size 256, tokenizer "bytes"; --val-fraction 0 writes no /val;
#     the README's command on Debian's fortunes (skipped when the package is not installed);
#  2. its errors: a missing file, a directory, an empty text (exit 3 naming the file); bad
#     flags, --tokenizer gpt2 without --vocab, an existing OUT without --force (exit 2); a
#     vocabulary directory without encoder.json (exit 3); --tokenizer gpt2 on a vocabulary made here;
#     failed conversion leaves an existing OUT as it was and no temporary;
#  3. data tokens: an llm.c file (1024-byte header) and a headerless nanoGPT one made here
#     round-trip; tokenizer gpt2 for 50257 ids, unknown otherwise; a size that is not the
#     header's, an odd size, a token >= --vocab-size (exit 3 naming file and position);
#  4. a job on token windows (data.seq_len): it trains (its loss falls below ln 256), a run
#     stopped at step 40 and resumed (from the file instead of memory) repeats the straight
#     run's lines bit for bit; the spec errors of data.seq_len (exit 2 at the key) and a
#     token dataset without vocab_size (exit 3).
# The job's model reads each token's id as a float32 (dtype:
# float32) through a per-token MLP, a bigram model; the targets are the int32 next tokens.
#
#   bash tests/e2e_text.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Prints `N passed, M failed` last and exits non-zero when M > 0.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

# ---------------------------------------------------------------- 1. data text
TXT=("$SRC/README.md" "$SRC/docs/DESIGN.md")
printf 'caf\xc3\xa9 \x00\xff bytes\n' >"$T/odd.txt" # UTF-8, NUL and 0xff: any byte is a token
expect_ok "wrote $T/t.h5" -- "$G" data text "$T/t.h5" --from "${TXT[@]}" --from "$T/odd.txt" --val-fraction 0.25
grep -qF "tokens (tokenizer bytes, vocab_size 256) from" "$ERR" && ok || { bad "summary line"; show; }
check "round trip: /train then /val are the files' bytes; /val the last 25%" "$PY" - "$T/t.h5" "${TXT[@]}" \
    "$T/odd.txt" <<'PY'
import math, sys
import h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
text = b"".join(open(p, "rb").read() for p in sys.argv[2:])
assert sorted(f.keys()) == ["train", "val"], list(f.keys())
tr, va = f["train/tokens"], f["val/tokens"]
assert tr.dtype == np.uint16 and va.dtype == np.uint16 and tr.ndim == 1
n = len(text)
assert tr.shape[0] == math.floor(n * 0.75) and tr.shape[0] + va.shape[0] == n, (tr.shape, va.shape, n)
both = np.concatenate([tr[:], va[:]])
assert bytes(both.astype(np.uint8)) == text and both.max() <= 255
for d in (tr, va):
    assert int(d.attrs["vocab_size"]) == 256, dict(d.attrs)
    t = d.attrs["tokenizer"]
    assert (t.decode() if isinstance(t, bytes) else t) == "bytes", t
PY
expect_ok "wrote" -- "$G" data text "$T/t0.h5" --from "$T/odd.txt" --val-fraction 0
check "--val-fraction 0: /train alone, every byte" "$PY" -c "
import h5py; f = h5py.File('$T/t0.h5', 'r')
assert list(f.keys()) == ['train'] and bytes(f['train/tokens'][:].astype('u1')) == open('$T/odd.txt', 'rb').read()"

FORT=/usr/share/games/fortunes
if [ -d "$FORT" ]; then
    # the README's command, OUT in this test's directory
    expect_ok "wrote" -- "$G" data text "$T/fortunes.h5" --from $(find $FORT -maxdepth 1 -type f ! -name '*.dat' |
        LC_ALL=C sort)
    check "fortunes: 2.5 MB of text, the last 10% in /val, every byte kept" "$PY" - "$T/fortunes.h5" "$FORT" <<'PY'
import os, sys
import h5py, numpy as np
f, d = h5py.File(sys.argv[1], "r"), sys.argv[2]
names = sorted(n for n in os.listdir(d) if not n.endswith(".dat") and not os.path.islink(os.path.join(d, n)))
text = b"".join(open(os.path.join(d, n), "rb").read() for n in names)
assert len(text) > 2_000_000, len(text)
both = np.concatenate([f["train/tokens"][:], f["val/tokens"][:]])
assert bytes(both.astype(np.uint8)) == text
assert f["val/tokens"].shape[0] == len(text) - int(len(text) * 0.9)
PY
else
    e2e_skip "$FORT is not installed (apt-get install fortunes, as scripts/dev.sh does)"
fi

# ---------------------------------------------------------------- 2. data text: errors
expect 3 "$T/nope.txt: no such file" -- "$G" data text "$T/x.h5" --from "$T/odd.txt" "$T/nope.txt"
expect 3 "$T: the input is a directory, not a regular file" -- "$G" data text "$T/x.h5" --from "$T"
: >"$T/empty.txt"
expect 3 "$T/empty.txt: empty: no text to tokenize" -- "$G" data text "$T/x.h5" --from "$T/empty.txt"
check "failed conversions leave no OUT and no temporary" sh -c "! ls '$T'/x.h5* 2>/dev/null | grep -q ."
expect 3 "$T/encoder.json: cannot open" -- \
    "$G" data text "$T/x.h5" --from "$T/odd.txt" --tokenizer gpt2 --vocab "$T"
expect 2 "--tokenizer gpt2 needs --vocab DIR" -- "$G" data text "$T/x.h5" --from "$T/odd.txt" --tokenizer gpt2
# --tokenizer gpt2 on a vocabulary made here (GPT-2's byte alphabet, the 256 byte tokens, merges
# "t h" and "th e", <|endoftext|>): the ids decode to the text, "the" is one token
mkdir -p "$T/voc"
"$PY" - "$T/voc" <<'PY'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
enc = {chr(c): i for i, c in enumerate(cs)}
enc["th"], enc["the"], enc["<|endoftext|>"] = 256, 257, 258
json.dump(enc, open(sys.argv[1] + "/encoder.json", "w"))
open(sys.argv[1] + "/vocab.bpe", "w").write("#version: 0.2\nt h\nth e\n")
PY
printf 'the other theme<|endoftext|>the end\n' >"$T/g.txt"
expect_ok "wrote $T/g.h5" -- "$G" data text "$T/g.h5" --from "$T/g.txt" --val-fraction 0 --tokenizer gpt2 --vocab "$T/voc"
check "--tokenizer gpt2: ids decode to the text; 'the' one token; <|endoftext|> one token" "$PY" - "$T" <<'PY'
import json, sys
import h5py
T = sys.argv[1]
enc = json.load(open(T + "/voc/encoder.json"))
dec = {i: s for s, i in enc.items()}
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
back = {chr(c): b for b, c in zip(bs, cs)}
f = h5py.File(T + "/g.h5", "r")
ids = [int(i) for i in f["train/tokens"][()]]
a = f["train/tokens"].attrs
assert int(a["vocab_size"]) == 259 and a["tokenizer"] in ("gpt2", b"gpt2"), dict(a)
text = b"".join(b"<|endoftext|>" if i == 258 else bytes(back[ch] for ch in dec[i]) for i in ids)
assert text == open(T + "/g.txt", "rb").read(), (ids, text)
assert ids.count(257) == 4 and ids.count(258) == 1, ids  # the, o-the-r, the-me, the end
print(ids)
PY
expect 2 "unknown tokenizer 'bpe' (bytes, gpt2)" -- "$G" data text "$T/x.h5" --from "$T/odd.txt" --tokenizer bpe
expect 2 "--vocab does not apply to --tokenizer bytes" -- "$G" data text "$T/x.h5" --from "$T/odd.txt" --vocab "$T"
expect 2 "--val-fraction: expected a number in [0, 0.5]" -- \
    "$G" data text "$T/x.h5" --from "$T/odd.txt" --val-fraction 0.6
expect 2 "--val-fraction: expected a number in [0, 0.5]" -- \
    "$G" data text "$T/x.h5" --from "$T/odd.txt" --val-fraction -0.1
expect 2 "--from FILE... is required" -- "$G" data text "$T/x.h5"
expect 2 "option --vocab-size does not apply" -- "$G" data text "$T/x.h5" --from "$T/odd.txt" --vocab-size 9
expect 2 "unknown option '--frm'" -- "$G" data text "$T/x.h5" --frm "$T/odd.txt"
SUM=$(md5sum <"$T/t0.h5")
expect 2 "already exists (pass --force to overwrite)" -- "$G" data text "$T/t0.h5" --from "$T/odd.txt"
expect 3 "$T/nope.txt: no such file" -- "$G" data text "$T/t0.h5" --from "$T/nope.txt" --force
expect 3 "$T/empty.txt: empty" -- "$G" data text "$T/t0.h5" --from "$T/empty.txt" --force
check "an existing OUT is as it was after failed conversions, no temporary beside it" \
    sh -c "[ \"\$(md5sum <'$T/t0.h5')\" = '$SUM' ] && ! ls '$T'/t0.h5.*.tmp 2>/dev/null | grep -q ."

# ---------------------------------------------------------------- 3. data tokens
"$PY" - "$T" <<'PY' || bad "making the .bin files"
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(1)
tr = rng.integers(0, 50257, size=5000).astype("<u2")
va = rng.integers(0, 50257, size=700).astype("<u2")
hdr = np.zeros(256, dtype="<i4"); hdr[:3] = [20240520, 1, len(tr)]
open(f"{d}/train.bin", "wb").write(hdr.tobytes() + tr.tobytes())   # llm.c
open(f"{d}/val.bin", "wb").write(va.tobytes())                      # nanoGPT: no header
open(f"{d}/cut.bin", "wb").write(hdr.tobytes() + tr[:-10].tobytes())
open(f"{d}/odd.bin", "wb").write(va.tobytes()[:-1])
small = (np.arange(600) % 300).astype("<u2"); small[123] = 300
open(f"{d}/small.bin", "wb").write(small.tobytes())
PY
expect_ok "wrote" -- "$G" data tokens "$T/k.h5" --from "$T/train.bin" --val "$T/val.bin"
grep -qF "llm.c header (version 1), 5000 tokens" "$ERR" && grep -qF "no header (nanoGPT's layout), 700 tokens" "$ERR" &&
    ok || { bad "the layouts said"; show; }
check "the .bin tokens round-trip; tokenizer gpt2, vocab_size 50257" "$PY" - "$T" <<'PY'
import sys
import h5py, numpy as np
d = sys.argv[1]
f = h5py.File(f"{d}/k.h5", "r")
tr = np.frombuffer(open(f"{d}/train.bin", "rb").read()[1024:], dtype="<u2")
va = np.frombuffer(open(f"{d}/val.bin", "rb").read(), dtype="<u2")
assert np.array_equal(f["train/tokens"][:], tr) and np.array_equal(f["val/tokens"][:], va)
for g in ("train", "val"):
    a = f[g + "/tokens"].attrs
    t = a["tokenizer"]
    assert int(a["vocab_size"]) == 50257 and (t.decode() if isinstance(t, bytes) else t) == "gpt2"
    assert f[g + "/tokens"].dtype == np.uint16
PY
expect 3 "$T/cut.bin: the llm.c header says 5000 tokens, 11024 bytes with the header, but the file has 11004 bytes" -- \
    "$G" data tokens "$T/x.h5" --from "$T/cut.bin"
expect 3 "$T/odd.bin: 1399 bytes, an odd size" -- "$G" data tokens "$T/x.h5" --from "$T/train.bin" --val "$T/odd.bin"
expect 3 "$T/small.bin: token 300 at position 123 is >= the vocab_size 300" -- \
    "$G" data tokens "$T/x.h5" --from "$T/small.bin" --vocab-size 300
expect 3 "$T/nope.bin: no such file" -- "$G" data tokens "$T/x.h5" --from "$T/nope.bin"
check "failed imports leave no OUT" sh -c "! ls '$T'/x.h5* 2>/dev/null | grep -q ."
expect 2 "--vocab-size: expected 1..65536" -- "$G" data tokens "$T/x.h5" --from "$T/val.bin" --vocab-size 0
expect 2 "--from TRAIN.bin is required" -- "$G" data tokens "$T/x.h5" --val "$T/val.bin"
expect 2 "option --val-fraction does not apply" -- "$G" data tokens "$T/x.h5" --from "$T/val.bin" --val-fraction 0.1
expect_ok "wrote" -- "$G" data tokens "$T/k301.h5" --from "$T/val.bin" --vocab-size 65536
check "another vocab_size: tokenizer unknown" "$PY" -c "
import h5py; a = h5py.File('$T/k301.h5', 'r')['train/tokens'].attrs; t = a['tokenizer']
assert int(a['vocab_size']) == 65536 and (t.decode() if isinstance(t, bytes) else t) == 'unknown'"

# ---------------------------------------------------------------- 4. a job on token windows
cat >"$T/tok.yaml" <<EOF
name: tok
seed: 3
data:
  train: {path: $T/t.h5, group: /train}
  val: {path: $T/t.h5, group: /val}
  seq_len: 32
  workers: 1
model:
  inputs: [{name: x, field: tokens, dtype: float32}]
  targets: [targets]
  layers:
    - reshape: {shape: [32, 1]}
    - dense: {units: 64}
    - gelu
    - dense: {units: 256}
train:
  batch_size: 16
  steps: 80
  optimizer: {type: adamw, lr: 0.003}
eval: {every_steps: 40}
log: {every_steps: 10, tensorboard: false}
EOF
expect 0 "" -- "$G" "$T/tok.yaml" --run-dir "$T/straight" "${THREADS[@]}" --quiet
check "it learns: the last val loss is below ln 256 (5.55)" "$PY" -c "
import json; ev = [json.loads(l) for l in open('$T/straight/metrics.jsonl') if '\"eval\"' in l]
assert len(ev) == 2 and ev[-1]['loss'] < 4.5, ev"
expect 0 "" -- "$G" "$T/tok.yaml" --run-dir "$T/halves" "${THREADS[@]}" --quiet --profile 37
expect 0 "resuming from $T/halves/checkpoints/step-000000040.h5 at step 40" -- \
    "$G" "$T/tok.yaml" --run-dir "$T/halves" --resume auto --set data.cache=none
check "stopped at step 40 and resumed (from the file): the straight run's lines, bit for bit" "$PY" - "$T" <<'PY'
import json, sys
d = sys.argv[1]
drop = {"time_s", "samples_per_s", "data_wait_pct", "rss_bytes", "cpu_pct"}
def lines(p):
    out = {}
    for l in open(p):
        r = json.loads(l)
        if r.get("kind") in ("train", "eval"):
            out[(r["kind"], r["step"])] = {k: v for k, v in r.items() if k not in drop}
    return out
a, b = lines(f"{d}/straight/metrics.jsonl"), lines(f"{d}/halves/metrics.jsonl")
assert ("train", 80) in a and ("eval", 40) in a and ("eval", 80) in a, sorted(a)
for k in a:
    assert k in b and a[k] == b[k], (k, a[k], b.get(k))
PY
expect_ok "seq_len: 32" -- "$G" validate "$T/tok.yaml"
expect 2 "data.train: $T/t.h5: /train is token data (a 1-D dataset tokens): token data needs data.seq_len" -- \
    "$G" validate "$T/tok.yaml" --set data.seq_len=null
expect 2 "data.seq_len: token windows are read by name: declare model.inputs: [tokens]" -- \
    "$G" validate "$T/tok.yaml" --set model.inputs=null --set model.targets=null
expect 2 "data.train: $T/t.h5: /train is token data" "model.inputs: [tokens], model.targets: [targets]" -- \
    "$G" validate "$T/tok.yaml" --set model.inputs=null --set model.targets=null --set data.seq_len=null
expect 2 "data.seq_len: must be <= 16777216" -- "$G" validate "$T/tok.yaml" --set data.seq_len=16777217
"$G" data csv "$T/h.h5" --from "$SRC/examples/regression/houses.csv" --target price_k >/dev/null 2>&1
expect 2 "data.seq_len: applies to token data, and $T/h.h5: /train is not" -- \
    "$G" validate "$T/tok.yaml" --set data.train.path="$T/h.h5" --set data.val=null
"$PY" -c "
import h5py; f = h5py.File('$T/nov.h5', 'w'); d = f.create_dataset('train/tokens', data=list(range(100)), dtype='u2')" ||
    bad "making nov.h5"
expect 3 "$T/nov.h5: /train/tokens: no attribute vocab_size" -- \
    "$G" validate "$T/tok.yaml" --set data.train.path="$T/nov.h5" --set data.val=null
expect 3 "$T/t0.h5: /train/tokens: 15 tokens, fewer than seq_len + 1 = 33" -- \
    "$G" validate "$T/tok.yaml" --set data.train.path="$T/t0.h5" --set data.val=null
e2e_done
