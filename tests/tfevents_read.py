#!/usr/bin/env python3
"""tfevents_read.py — an independent reader of gpurun's TensorBoard files.

Usage: tfevents_read.py RUN_DIR [--require TAG[:MIN_COUNT]]... [--unique]

Reads every events.out.tfevents.* file in RUN_DIR (TFRecord framing:
uint64 length | masked crc32c(length) | data | masked crc32c(data), all
little-endian; data is a tensorflow.Event protobuf), checks both CRCs of each
record, decodes the Event/Summary fields by hand (no TensorFlow needed) and
prints one line per scalar tag:  TAG  COUNT  first_step  last_step  last_value.

Exit status: 0 when all is well; 1 on a CRC error, a truncated record, a
malformed protobuf, a file not starting with a file_version event, or a
--require'd tag missing or seen fewer than MIN_COUNT times (default 1), or
with --unique a (tag, step) pair seen twice (all files together: a resumed
run must not log a step again);
2 on usage errors or when RUN_DIR holds no event file.
"""
import glob
import os
import struct
import sys

_POLY = 0x82F63B78  # CRC-32C, reflected
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (_POLY if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class FormatError(Exception):
    pass


def varint(buf, pos):
    v, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise FormatError("truncated varint")
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message;
    value is an int (varint, fixed64, fixed32) or bytes (length-delimited)."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise FormatError("truncated fixed64")
            v = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == 5:
            if pos + 4 > len(buf):
                raise FormatError("truncated fixed32")
            v = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > len(buf):
                raise FormatError("length-delimited field runs past the end")
            v = bytes(buf[pos:pos + n])
            pos += n
        else:
            raise FormatError("unsupported wire type %d" % wire)
        yield field, wire, v


def parse_event(data):
    """Event: wall_time=1 (double), step=2 (int64), file_version=3 (string),
    summary=5 -> Summary.value=1 -> Value {tag=1, simple_value=2 (float)}."""
    ev = {"wall_time": 0.0, "step": 0, "file_version": None, "scalars": []}
    for f, w, v in fields(data):
        if f == 1 and w == 1:
            ev["wall_time"] = struct.unpack("<d", struct.pack("<Q", v))[0]
        elif f == 2 and w == 0:
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif f == 3 and w == 2:
            ev["file_version"] = v.decode("utf-8", "replace")
        elif f == 5 and w == 2:
            for sf, sw, sv in fields(v):
                if sf == 1 and sw == 2:
                    tag, val = None, None
                    for vf, vw, vv in fields(sv):
                        if vf == 1 and vw == 2:
                            tag = vv.decode("utf-8", "replace")
                        elif vf == 2 and vw == 5:
                            val = struct.unpack("<f", struct.pack("<I", vv))[0]
                    if tag is not None and val is not None:
                        ev["scalars"].append((tag, val))
    return ev


def read_records(path):
    with open(path, "rb") as f:
        buf = f.read()
    pos, k = 0, 0
    while pos < len(buf):
        if len(buf) - pos < 12:
            raise FormatError("record %d at byte %d: truncated header" % (k, pos))
        head = buf[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (lcrc,) = struct.unpack_from("<I", buf, pos + 8)
        if lcrc != masked_crc(head):
            raise FormatError("record %d at byte %d: length CRC mismatch" % (k, pos))
        if pos + 12 + length + 4 > len(buf):
            raise FormatError("record %d at byte %d: truncated data (%d bytes)" % (k, pos, length))
        data = buf[pos + 12:pos + 12 + length]
        (dcrc,) = struct.unpack_from("<I", buf, pos + 12 + length)
        if dcrc != masked_crc(data):
            raise FormatError("record %d at byte %d: data CRC mismatch" % (k, pos))
        yield data
        pos += 12 + length + 4
        k += 1


def main(argv):
    args, require, unique = [], [], False
    it = iter(argv[1:])
    for a in it:
        if a == "--unique":
            unique = True
        elif a == "--require":
            req = next(it, None)
            if req is None:
                print("--require needs TAG[:MIN_COUNT]", file=sys.stderr)
                return 2
            tag, _, n = req.partition(":")
            require.append((tag, int(n) if n else 1))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            args.append(a)
    if len(args) != 1:
        print("usage: tfevents_read.py RUN_DIR [--require TAG[:MIN_COUNT]]... [--unique]", file=sys.stderr)
        return 2
    files = sorted(glob.glob(os.path.join(args[0], "events.out.tfevents.*")))
    if not files:
        print("%s: no events.out.tfevents.* file" % args[0], file=sys.stderr)
        return 2
    stats = {}  # tag -> [count, first_step, last_step, last_value]
    seen, dups = set(), []
    bad = False
    for path in files:
        try:
            n = 0
            for data in read_records(path):
                ev = parse_event(data)
                if n == 0 and not (ev["file_version"] or "").startswith("brain.Event:"):
                    raise FormatError("first record is not a file_version event")
                n += 1
                for tag, val in ev["scalars"]:
                    if (tag, ev["step"]) in seen:
                        dups.append((tag, ev["step"]))
                    seen.add((tag, ev["step"]))
                    s = stats.setdefault(tag, [0, ev["step"], ev["step"], val])
                    s[0] += 1
                    s[2], s[3] = ev["step"], val
            print("%s: %d records" % (os.path.basename(path), n))
        except FormatError as e:
            print("%s: %s" % (path, e), file=sys.stderr)
            bad = True
    for tag in sorted(stats):
        c, s0, s1, v = stats[tag]
        print("%-24s %6d  steps %d..%d  last %.6g" % (tag, c, s0, s1, v))
    if unique and dups:
        print("%s: %d (tag, step) pairs logged more than once, the first: %s at step %d"
              % (args[0], len(dups), dups[0][0], dups[0][1]), file=sys.stderr)
        bad = True
    for tag, n in require:
        have = stats.get(tag, [0])[0]
        if have < n:
            print("%s: tag %s seen %d times, expected at least %d" % (args[0], tag, have, n), file=sys.stderr)
            bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
