#!/usr/bin/env python3
"""resume_check.py — the checks tests/e2e_resume.sh and tests/e2e_spot.sh make on runs
and checkpoints, with h5py/numpy (CRC-32C in pure Python, as an independent reader):
  same RUN_A RUN_B [--last]   run B reads like run A: train and eval lines, weights.h5 bytes, and
                              summary.json's record of the run (loss, accuracies, steps, ...)
  ckeq CKPT_A CKPT_B          same step and tensors, byte for byte
  verify CKPT [attr=value]... format, attributes, every dataset's crc32c
  flip CKPT DATASET           flips one bit inside the dataset's bytes on disk
  deltensor CKPT DATASET      deletes a dataset
  widen CKPT OBJECT ATTR N    rewrites an attribute of OBJECT ("/": the file) as N copies of its value
  committed DIR               verifies every step-*.h5 of DIR, prints the newest step (0: none)
"""
import json, os, re, sys
import h5py, numpy as np

def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
TBL = _table()

def crc32c(data):
    crc = 0xFFFFFFFF
    t = TBL
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value

def metrics(path, last):
    train, ev = {}, {}
    order, times = [], []
    for line in open(path):
        d = json.loads(line, parse_float=str)  # exact: the numbers as written
        if d["kind"] == "train":
            order.append(d["step"])
            times.append(float(d["time_s"]))
            if d["step"] in train and not last:
                raise AssertionError(f"{path}: step {d['step']} logged twice")
            train[d["step"]] = (d["epoch"], d["loss"], d["lr"])
        elif d["kind"] == "eval":
            ev[d["step"]] = (d["split"], d["epoch"], d["loss"], d["accuracy"])
    if not last:
        assert order == sorted(order), f"{path}: train steps out of order"
        # a resumed run's clock goes on from the checkpoint's
        assert times == sorted(times), f"{path}: time_s goes back: {times}"
    return train, ev

def datasets(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out

def same(a, b, *opt):
    """the run in directory b reads like the run in a: train lines (epoch, loss, lr as written),
    eval lines, and every dataset of weights.h5 byte for byte; lists every difference"""
    last = "--last" in opt
    ta, ea = metrics(a + "/metrics.jsonl", last)
    tb, eb = metrics(b + "/metrics.jsonl", last)
    n = max(ta)
    errs = []
    if sorted(tb) != sorted(ta):  # every step, or every log.every_steps-th and the last
        errs.append(f"{b}: train steps {sorted(tb)[:5]}...{sorted(tb)[-5:]}, {a}: {sorted(ta)[:5]}...{sorted(ta)[-5:]}")
    bad = [s for s in ta if ta[s] != tb.get(s)]
    if bad:
        s = bad[0]
        errs.append(f"train lines of {len(bad)} steps differ, the first: step {s}: {ta[s]} / {tb.get(s)}")
    with h5py.File(a + "/weights.h5", "r") as fa, h5py.File(b + "/weights.h5", "r") as fb:
        da, db = datasets(fa), datasets(fb)
        if sorted(da) != sorted(db):
            errs.append(f"weights.h5 datasets: {sorted(da)} / {sorted(db)}")
        if not any(k.startswith("params/") for k in da):
            errs.append(f"{a}/weights.h5 has no /params")
        for k in sorted(set(da) & set(db)):
            x, y = da[k][...], db[k][...]
            if x.dtype != y.dtype or x.shape != y.shape:
                errs.append(f"weights.h5 {k}: {x.dtype}{x.shape} / {y.dtype}{y.shape}")
            elif x.tobytes() != y.tobytes():
                errs.append(f"weights.h5 {k}: differs (max abs diff {np.max(np.abs(x.astype(np.float64) - y)):.3g})")
    for s in sorted(set(ea) | set(eb)):
        if ea.get(s) != eb.get(s):
            errs.append(f"eval line of step {s}: {ea.get(s)} / {eb.get(s)}")
    if os.path.exists(a + "/summary.json"):
        sa, sb = (json.load(open(d + "/summary.json"), parse_float=str) for d in (a, b))
        for k in ("status", "steps", "epochs", "final_train_loss", "best_val_accuracy", "last_val_accuracy",
                  "last_val_loss", "loss_scale", "skipped_steps", "precision", "params"):
            if sa.get(k) != sb.get(k):
                errs.append(f"summary.json {k}: {sa.get(k)} / {sb.get(k)}")
    assert not errs, "\n".join(errs)
    print(f"{n} steps, {len(ea)} evals, {len(da)} tensors identical")

def ckeq(a, b):
    """two checkpoints hold the same step and the same tensors, byte for byte"""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        da, db = datasets(fa), datasets(fb)
        errs = [f"{k}: step {fa.attrs[k]} / {fb.attrs[k]}" for k in ("step", "epoch", "sample_in_epoch")
                if fa.attrs[k] != fb.attrs[k]]
        if sorted(da) != sorted(db):
            errs.append(f"datasets: {sorted(da)} / {sorted(db)}")
        for k in sorted(set(da) & set(db)):
            x, y = da[k][...], db[k][...]
            if x.tobytes() != y.tobytes():
                errs.append(f"{k}: differs (max abs diff {np.max(np.abs(x.astype(np.float64) - y)):.3g})")
    assert not errs, "\n".join(errs)

def verify(path, *kv):
    with h5py.File(path, "r") as f:
        at = dict(f.attrs)
        def val(v):
            return v.decode() if isinstance(v, bytes) else v
        assert val(at.get("format")) == "gpurun-checkpoint", at.get("format")
        assert int(at.get("version")) == 2, at.get("version")
        assert "record_crc32c" in at, "root attribute record_crc32c missing"
        for k in ("step", "epoch", "sample_in_epoch", "world_size", "precision", "loss_scale", "rng",
                  "optimizer", "optim_slots", "spec"):
            assert k in at, f"root attribute {k} missing"
        for e in kv:
            k, v = e.split("=", 1)
            got = val(at[k])
            if isinstance(got, np.ndarray):
                got = ",".join(str(x) for x in got.tolist())
            assert str(got) == v, f"attribute {k}: {got!r}, expected {v}"
        ds = datasets(f)
        params = [k[len("params/"):] for k in ds if k.startswith("params/")]
        assert params, "no /params"
        slots = {"sgd": ["momentum_buffer"], "adamw": ["exp_avg", "exp_avg_sq"]}[val(at["optimizer"])]
        if int(at["optim_slots"]) == 0:
            slots = []
        assert len(slots) == int(at["optim_slots"]), (slots, at["optim_slots"])
        for p in params:
            for s in slots:
                assert f"optim/{p}/{s}" in ds, f"optim/{p}/{s} missing"
                assert ds[f"optim/{p}/{s}"].shape == ds["params/" + p].shape, f"optim/{p}/{s}: shape"
        for k, d in ds.items():
            assert k.split("/")[0] in ("params", "state", "optim"), k
            assert d.dtype == np.float32, (k, d.dtype)
            assert "crc32c" in d.attrs, f"{k}: no crc32c attribute"
            stored = int(d.attrs["crc32c"])
            got = crc32c(np.ascontiguousarray(d[...], dtype="<f4").tobytes())
            assert stored == got, f"{k}: crc32c stored 0x{stored:08x}, computed 0x{got:08x}"
    print(f"{path}: {len(ds)} datasets verified")

def flip(path, name):
    with h5py.File(path, "r") as f:
        d = f[name]
        off = d.id.get_offset()
        assert off is not None, f"{name}: not contiguous"
        off += d.id.get_storage_size() // 2
    with open(path, "r+b") as fh:
        fh.seek(off)
        b = fh.read(1)
        fh.seek(off)
        fh.write(bytes([b[0] ^ 0x10]))

def deltensor(path, name):
    with h5py.File(path, "a") as f:
        del f[name]

def widen(path, obj, attr, n):
    with h5py.File(path, "a") as f:
        o = f[obj]
        v = o.attrs[attr]
        del o.attrs[attr]
        o.attrs.create(attr, np.array([v] * int(n)))

def committed(d):
    newest = 0
    if not os.path.isdir(d):  # killed before the run made its checkpoint directory
        print(newest)
        return
    for name in sorted(os.listdir(d)):
        m = re.fullmatch(r"step-(\d{9})\.h5", name)
        if not m:
            continue
        with h5py.File(os.path.join(d, name), "r") as f:
            a = f.attrs
            assert a["format"] in (b"gpurun-checkpoint", "gpurun-checkpoint"), (name, a["format"])
            assert int(a["step"]) == int(m.group(1)), (name, a["step"])
            for k, ds in datasets(f).items():
                got = crc32c(np.ascontiguousarray(ds[...], dtype="<f4").tobytes())
                assert got == int(ds.attrs["crc32c"]), f"{name}: {k}: crc32c mismatch"
        newest = max(newest, int(m.group(1)))
    print(newest)

if __name__ == "__main__":  # tests/campaign/camp.py imports its crc32c
    {"same": same, "ckeq": ckeq, "verify": verify, "flip": flip, "deltensor": deltensor,
     "widen": widen, "committed": committed}[sys.argv[1]](*sys.argv[2:])
