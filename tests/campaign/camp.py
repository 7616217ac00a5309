#!/usr/bin/env python3
"""camp.py — what tests/e2e_campaign.sh and tests/campaign_slow.sh need from h5py/numpy:

  snap DIR                 a manifest of every committed file under DIR (recursively):
                           config.yaml, metrics.jsonl, summary.json, weights.h5, LATEST,
                           step-*.h5, events.out.tfevents.*: relative path, kind and sha256
                           (a symlink: its target, never followed; DIR absent: nothing)
  compat A B               run B ended where the uninterrupted run A did, whatever B's logging
                           cadence: every weights.h5 dataset byte for byte, the eval lines of the
                           steps both logged (at least one), the train lines of the steps both
                           logged after B's last resume point... and summary.json's record
                           (status, steps, epochs, final loss, accuracies, params)
  floatdata SRC OUT [SPLIT:SAMPLE:VALUE[:DTYPE]]...
                           SRC's splits as float32 (or DTYPE) images in [0,1], with VALUE
                           (nan, inf, -inf) put in one pixel of that sample
  badweight SRC OUT TENSOR VALUE
                           a copy of weights/checkpoint SRC with VALUE (nan, inf) in one element
                           of TENSOR, the tensor's crc32c recomputed (so only the value is wrong)
  flipall DIR TENSOR       flips one bit inside TENSOR's bytes in every step-*.h5 of DIR
                           (the crc32c then mismatches; the files stay valid HDF5)
  labels SRC OUT SPLIT SAMPLE LABEL    a copy of SRC with one label changed
"""
import hashlib, json, os, re, shutil, stat, sys
import h5py, numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from resume_check import crc32c  # noqa: E402  (the tests' one pure-Python CRC-32C)

COMMITTED = re.compile(r"^(config\.yaml|\.owner|metrics\.jsonl|summary\.json|weights\.h5|LATEST|"
                       r"step-\d+\.h5|events\.out\.tfevents\..*)$")


def snap(d):
    out = []
    if os.path.lexists(d):
        for root, dirs, files in os.walk(d):
            dirs.sort()
            for name in sorted(files + [x for x in dirs if os.path.islink(os.path.join(root, x))]):
                if not COMMITTED.match(name) or name.endswith(".tmp"):
                    continue
                p = os.path.join(root, name)
                rel = os.path.relpath(p, d)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    out.append(f"{rel} symlink -> {os.readlink(p)}")
                elif stat.S_ISREG(st.st_mode):
                    h = hashlib.sha256()
                    with open(p, "rb") as f:
                        for b in iter(lambda: f.read(1 << 20), b""):
                            h.update(b)
                    out.append(f"{rel} file {st.st_size} {h.hexdigest()}")
                else:
                    out.append(f"{rel} other mode {oct(st.st_mode)}")
            # directories named like a committed file (config.yaml/ ...) are listed too
            for name in sorted(dirs):
                if COMMITTED.match(name) and not os.path.islink(os.path.join(root, name)):
                    out.append(f"{os.path.relpath(os.path.join(root, name), d)} directory")
    print("\n".join(out))


def _lines(path):
    train, ev = {}, {}
    for line in open(path):
        if not line.strip():
            continue
        d = json.loads(line, parse_float=str)
        if d["kind"] == "train":
            train[d["step"]] = (d["epoch"], d["loss"], d["lr"])
        elif d["kind"] == "eval":
            ev[d["step"]] = (d["split"], d["epoch"], d["loss"], d["accuracy"])
    return train, ev


def _datasets(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out


def compat(a, b):
    errs = []
    ta, ea = _lines(a + "/metrics.jsonl")
    tb, eb = _lines(b + "/metrics.jsonl")
    common = sorted(set(ea) & set(eb))
    if not common:
        errs.append(f"no eval step logged by both runs ({sorted(ea)} / {sorted(eb)})")
    for s in common:
        if ea[s] != eb[s]:
            errs.append(f"eval line of step {s}: {ea[s]} / {eb[s]}")
    # a train line averages the steps since the previous line: compare the steps where both runs
    # logged the line before too (same window)
    sa, sb = sorted(ta), sorted(tb)
    pa = {s: (sa[i - 1] if i else 0) for i, s in enumerate(sa)}
    pb = {s: (sb[i - 1] if i else 0) for i, s in enumerate(sb)}
    same_window = [s for s in set(ta) & set(tb) if pa[s] == pb[s]]
    bad = [s for s in sorted(same_window) if ta[s] != tb[s]]
    if bad:
        errs.append(f"train lines of {len(bad)} steps differ, the first: step {bad[0]}: {ta[bad[0]]} / {tb[bad[0]]}")
    with h5py.File(a + "/weights.h5", "r") as fa, h5py.File(b + "/weights.h5", "r") as fb:
        da, db = _datasets(fa), _datasets(fb)
        if sorted(da) != sorted(db):
            errs.append(f"weights.h5 datasets: {sorted(da)} / {sorted(db)}")
        if not any(k.startswith("params/") for k in da):
            errs.append(f"{a}/weights.h5 has no /params")
        for k in sorted(set(da) & set(db)):
            x, y = da[k][...], db[k][...]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                errs.append(f"weights.h5 {k}: differs")
    sa_, sb_ = (json.load(open(d + "/summary.json"), parse_float=str) for d in (a, b))
    keys = ["status", "steps", "epochs", "best_val_accuracy", "last_val_accuracy", "last_val_loss", "params",
            "precision", "loss_scale", "skipped_steps"]
    # the final train loss is the last train line's: the same when that line's window is
    last = max(ta) if ta else None
    if last in same_window:
        keys.append("final_train_loss")
    for d, s, t in ((a, sa_, ta), (b, sb_, tb)):
        if t and float(s.get("final_train_loss")) != float(t[max(t)][1]):
            errs.append(f"{d}/summary.json final_train_loss {s.get('final_train_loss')} is not the last train "
                        f"line's {t[max(t)][1]}")
    for k in keys:
        if sa_.get(k) != sb_.get(k):
            errs.append(f"summary.json {k}: {sa_.get(k)} / {sb_.get(k)}")
    assert not errs, "; ".join(errs[:4])
    print(f"{len(da)} tensors, {len(common)} eval lines, {len(same_window)} train lines identical")


def floatdata(src, out, *puts):
    with h5py.File(src, "r") as f, h5py.File(out, "w") as g:
        dt = {}
        for p in puts:
            parts = p.split(":")
            if len(parts) > 3:
                dt[parts[0]] = parts[3]
        for split in f:
            im = f[split + "/images"][...].astype(np.float32) / 255
            im = im.astype(dt.get(split, "float32"))
            for p in puts:
                parts = p.split(":")
                if parts[0] == split:
                    im[int(parts[1])].flat[7] = float(parts[2])
            g[split + "/images"] = im
            g[split + "/labels"] = f[split + "/labels"][...]




def badweight(src, out, tensor, value):
    shutil.copy(src, out)
    with h5py.File(out, "a") as f:
        d = f[tensor]
        v = d[...]
        v.flat[v.size // 2] = float(value)
        d[...] = v
        d.attrs["crc32c"] = np.uint32(crc32c(np.ascontiguousarray(v, dtype="<f4").tobytes()))


def flipall(d, tensor):
    n = 0
    for name in sorted(os.listdir(d)):
        if not re.fullmatch(r"step-\d+\.h5", name):
            continue
        p = os.path.join(d, name)
        with h5py.File(p, "r") as f:
            ds = f[tensor]
            off = ds.id.get_offset() + ds.id.get_storage_size() // 2
        with open(p, "r+b") as fh:
            fh.seek(off)
            b = fh.read(1)
            fh.seek(off)
            fh.write(bytes([b[0] ^ 0x10]))
        n += 1
    assert n, f"no step-*.h5 in {d}"


def labels(src, out, split, sample, label):
    shutil.copy(src, out)
    with h5py.File(out, "a") as f:
        d = f[split + "/labels"]
        v = d[...]
        v[int(sample)] = int(label)
        d[...] = v


{"snap": snap, "compat": compat, "floatdata": floatdata, "badweight": badweight, "flipall": flipall,
 "labels": labels}[sys.argv[1]](*sys.argv[2:])
