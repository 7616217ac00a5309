# tests/campaign/round2_inputs.bash — the bad-input campaign's second round (issue 23, items 5,
# 7, 8, 9). Sourced by tests/e2e_campaign.sh after tests/campaign/lib.bash; it defines one
# function, round2_inputs, to call after camp_fixtures (it uses G, T, PY, $T/base.yaml, the
# template run $T/tmpl and victim from lib.bash). Cases:
#
#   path    (5) --run-dir, log.dir, checkpoint.dir over 1000 bytes (GR_DIR_MAX) and file paths
#           over 1023 (data.train.path, model.init_from, the spec, --checkpoint, --resume PATH, a
#           predict INPUT): exit 2 naming the option or key and the limit. A --run-dir cut at
#           1023 bytes was its parent: the run wrote config.yaml, metrics.jsonl, .lock there,
#           which must stay empty. A run directory of exactly 1000 bytes runs, its files in it
#   term    (7) summarize over runs whose config.yaml name and summary.json status hold ESC,
#           BEL, CR and LF, and a directory named with a newline: one line per run in the table,
#           no control byte in it (shown \x1b, \n...); --csv and --json read back (Python's csv,
#           json) to as many rows and the very strings
#   map     (8) a spec map of 199,999 keys, the last a duplicate (the error at its line, naming
#           the first), or all unknown; 200,001 keys (past the 200,000-node cap); 90,000 anchors
#           and aliases (the cap again); 45,000 blocks each used once; summarize over a
#           config.yaml of 150,000 keys: each answered inside the case's time limit (a linear
#           scan per key, alias or block made these seconds to minutes)
#   count   (9) plan --memory 16777215T (2^64 - 2^40) and other byte counts past 10^18: exit 2
#           before the plan is printed; predict --top 4294967297 (it wrapped to 1); --threads,
#           --profile, data synthetic --n/--shape/--classes/--test/--seed, plot --size past
#           int64; --set and spec integers past int64, parallel.bucket_mb past 1 TiB,
#           GPURUN_MEMORY_LIMIT past int64: exit 2 naming the option or key and the value

# r2_key_case NAME SED LINE KEY LIMIT: the base job edited by SED against a stopped run (--resume
# auto): exit 2 at the spec's LINE naming KEY (an ERE) and the LIMIT, the run untouched
r2_key_case() {
    victim "r2_$1"
    job "r2_$1" "$2"
    kase "r2.path.$1" 2 "$V" "re:^gpurun: $(rx "$T/r2_$1.yaml"):$3:[0-9]+: $4 .*limit is $5" -- \
        "$G" "$T/r2_$1.yaml" --run-dir "$V" --resume auto --quiet
}

round2_inputs() {
    local P D L F a b c i big
    # r2_path BASE LEN: BASE/dddd... exactly LEN bytes long, in components of at most 200 bytes
    r2_path() {
        local p=$1 n r
        while [ ${#p} -lt "$2" ]; do
            r=$(($2 - ${#p} - 1))
            n=$((r > 200 ? 200 : r))
            [ $((r - n)) -eq 1 ] && n=$((n - 1)) # never leave room for a "/" alone
            p=$p/$(printf '%*s' "$n" '' | tr ' ' d)
        done
        printf '%s' "$p"
    }
    # r2_empty NAME DIR: DIR holds nothing at all (not even .lock)
    r2_empty() {
        if [ -z "$(find "$2" -mindepth 1 -maxdepth 1 2>/dev/null | head -n 1)" ]; then pass "$1" "the cut path untouched"
        else fail "$1" "written at the cut path: $(cd "$2" && ls -A | tr '\n' ' ' | cut -c1-120)"; fi
    }

    # ---------------------------------------------------------------- path (item 5)
    # the parent P is 1022 bytes: cut to 1023, --run-dir P/run was "P/", and the run wrote there
    P=$(r2_path "$T/r2_cut" 1022)
    mkdir -p "$P"
    kase r2.path.run_dir_cut 2 "$P" "--run-dir" "1000 bytes" -- "$G" "$T/base.yaml" --run-dir "$P/run" --quiet
    r2_empty r2.path.run_dir_cut_nothing "$P"
    [ ! -e "$P/run" ] && pass r2.path.run_dir_cut_none "no run directory made" || fail r2.path.run_dir_cut_none "$P/run made"
    D=$(r2_path "$T/r2_1001" 1001)
    kase r2.path.run_dir_1001 2 - "--run-dir" "1001 bytes" -- "$G" "$T/base.yaml" --run-dir "$D" --quiet
    [ ! -e "$T/r2_1001" ] && pass r2.path.run_dir_1001_none "nothing made" || fail r2.path.run_dir_1001_none "made $T/r2_1001"
    D=$(r2_path "$T/r2_1000" 1000)
    crun 120 "$G" "$T/base.yaml" --run-dir "$D" --quiet
    if [ "$RC" -eq 0 ] && [ -f "$D/summary.json" ] && [ -f "$D/weights.h5" ] && [ -f "$D/checkpoints/LATEST" ] &&
        [ -f "$D/checkpoints/$(ckname 40)" ] && [ -f "$D/config.yaml" ]; then
        pass r2.path.run_dir_1000 "exit 0 in $WALL s, every file in the 1000-byte directory"
    else
        fail r2.path.run_dir_1000 "exit $RC; files: $(cd "$D" 2>/dev/null && ls -A | tr '\n' ' ')"
        detail
    fi
    L=$(r2_path "$T/r2_long" 1001)
    r2_key_case log_dir "s#^log: {every_steps: 1}#log: {every_steps: 1, dir: $L}#" 19 'log\.dir: 1001 bytes long;' 1000
    r2_key_case checkpoint_dir "s#^checkpoint: {every_steps: 10, keep: 9}#checkpoint: {every_steps: 10, keep: 9, dir: $L}#" \
        17 'checkpoint\.dir:' 1000
    victim r2_setdir
    kase r2.path.set_log_dir 2 "$V" "re:^gpurun: --set:1:[0-9]+: log\.dir: .*limit is 1000" -- \
        "$G" "$T/base.yaml" --set "log.dir=$L" --run-dir "$V" --resume auto --quiet
    F=$(r2_path "$T/r2_long" 1100).h5
    r2_key_case data_train "s#path: $T/s.h5, group: /train#path: $F, group: /train#" 5 'data\.train\.path:' 1023
    r2_key_case init_from "/^model:/a\\  init_from: $F" 8 'model\.init_from:' 1023
    D=$(r2_path "$T/r2_spec" 1100)
    mkdir -p "$D" && cp "$T/base.yaml" "$D/s.yaml"
    kase r2.path.spec 2 - "limit is 1023" -- "$G" validate --no-data "$D/s.yaml"
    victim r2_resume
    kase r2.path.resume 2 "$V" "--resume" "limit is 1023" -- "$G" "$T/base.yaml" --run-dir "$V" --resume "$F" --quiet
    kase r2.path.eval_checkpoint 2 - "--checkpoint" "limit is 1023" -- "$G" eval "$T/base.yaml" --checkpoint "$F"
    kase r2.path.predict_checkpoint 2 - "--checkpoint" "limit is 1023" -- \
        "$G" predict "$T/base.yaml" --checkpoint "$F" "$T/s.h5:/test"
    kase r2.path.predict_input 2 - "INPUT" "limit is 1023" -- \
        "$G" predict "$T/base.yaml" --checkpoint "$T/tmpl/weights.h5" "$F:/test"
    # summarize a run directory below a 1023-byte one: a buffer of 1024 read the one above
    P=$(r2_path "$T/r2_sumlong" 1023)
    mkdir -p "$(dirname "$P")" && cp -a "$T/tmpl" "$P" && cp -a "$T/tmpl" "$P/sub"
    sed -i 's/^name: .*/name: sub/' "$P/sub/config.yaml"
    kase r2.path.summarize 0 "$P" -- "$G" summarize "$P/sub" "$T/tmpl" --json
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(not (r[0]["name"] == "sub" and r[1]["name"] == "camp"))' \
        "$OUT" && pass r2.path.summarize_which "the run asked for" || fail r2.path.summarize_which "$(head -c 200 "$OUT")"

    # ---------------------------------------------------------------- term (item 7)
    a=$T/r2_esc_a b=$T/r2_esc_b c=$T/$'r2_esc\nc'
    for D in "$a" "$b" "$c"; do rm -rf "$D" && cp -a "$T/tmpl" "$D"; done
    "$PY" - "$a" "$b" "$c" <<'EOF' || fail r2.term.fixture "could not edit the runs"
import json, sys
a, b, c = sys.argv[1:4]
def name(d, yaml_text):
    p = d + "/config.yaml"
    lines = [yaml_text if l.startswith("name:") else l for l in open(p).read().split("\n")]
    open(p, "w").write("\n".join(lines))
name(a, 'name: "evil\\e]0;pwned\\a\\nfake  row  finished  40"')
name(b, 'name: "tab\\there\\r\\\\x,\\"q\\"\\x9b31m"')  # U+009B: CSI to some terminals
name(c, 'name: "bell\\aonly"')
s = json.load(open(a + "/summary.json"))
s["status"] = "finished\x1b[2J\x1b[H\r\nforged row\x07"
json.dump(s, open(a + "/summary.json", "w"))
EOF
    kase r2.term.table 0 "$a" -- "$G" summarize "$a" "$b" "$c"
    "$PY" - "$OUT" <<'EOF' && pass r2.term.table_lines "one line per run, control bytes escaped" || fail r2.term.table_lines "see above"
import sys
out = open(sys.argv[1], "rb").read()
lines = out.split(b"\n")[:-1]
bad = [c for c in out if (c < 0x20 and c != 0x0a) or c == 0x7f]
ok = len(lines) == 4 and not bad and out.endswith(b"\n")
ok = ok and b"evil\\x1b]0;pwned\\x07\\nfake  row" in out and b"finished\\x1b[2J\\x1b[H\\r\\nforged row\\x07" in out
ok = ok and b"r2_esc\\nc  bell\\x07only" in out and b'tab\\there\\r\\\\x,"q"\\u009b31m' in out
ok = ok and b"\xc2\x9b" not in out
sys.exit(0 if ok else print(out.decode(errors="replace")) or 1)
EOF
    kase r2.term.csv 0 "$a" -- "$G" summarize "$a" "$b" "$c" --csv
    "$PY" - "$OUT" "$a" "$c" <<'EOF' && pass r2.term.csv_rows "3 rows, the strings as they were" || fail r2.term.csv_rows "see above"
import csv, io, sys
raw = open(sys.argv[1], newline="").read()
rows = list(csv.reader(io.StringIO(raw, newline="")))
head, body = rows[0], rows[1:]
col = {k: i for i, k in enumerate(head)}
ok = len(body) == 3 and all(len(r) == len(head) for r in body)
ok = ok and body[0][col["name"]] == "evil\x1b]0;pwned\x07\nfake  row  finished  40"
ok = ok and body[0][col["status"]] == "finished\x1b[2J\x1b[H\r\nforged row\x07"
ok = ok and body[1][col["name"]] == 'tab\there\r\\x,"q"\x9b31m' and body[2][col["run"]] == sys.argv[3]
ok = ok and body[2][col["name"]] == "bell\x07only" and ',"bell\x07only",' in raw  # quoted: a control byte
sys.exit(0 if ok else print(rows) or 1)
EOF
    kase r2.term.json 0 "$a" -- "$G" summarize "$a" "$b" "$c" --json
    "$PY" - "$OUT" "$a" "$c" <<'EOF' && pass r2.term.json_rows "3 objects, the strings as they were" || fail r2.term.json_rows "see above"
import json, sys
raw = open(sys.argv[1], "rb").read()
rows = json.loads(raw)
ok = len(rows) == 3 and not [c for c in raw if (c < 0x20 and c != 0x0a) or c == 0x7f]
ok = ok and rows[0]["name"] == "evil\x1b]0;pwned\x07\nfake  row  finished  40"
ok = ok and rows[0]["status"] == "finished\x1b[2J\x1b[H\r\nforged row\x07"
ok = ok and rows[1]["name"] == 'tab\there\r\\x,"q"\x9b31m' and rows[2]["run"] == sys.argv[3]
ok = ok and b"\xc2\x9b" not in raw
ok = ok and rows[2]["name"] == "bell\x07only"
sys.exit(0 if ok else print(rows) or 1)
EOF

    # ---------------------------------------------------------------- map (item 8)
    "$PY" - "$T" <<'EOF' || fail r2.map.fixture "could not write the specs"
import sys
t = sys.argv[1]
keys = "".join("k%d: 1\n" % i for i in range(199998))
open(t + "/r2_dup.yaml", "w").write(keys + "k5: 2\n")
open(t + "/r2_unknown.yaml", "w").write(keys + "k199998: 1\n")
open(t + "/r2_nodes.yaml", "w").write(keys + "".join("k%d: 1\n" % i for i in range(199998, 200001)))
open(t + "/r2_anchors.yaml", "w").write("".join("a%d: &x%d 1\n" % (i, i) for i in range(90000)) +
                                        "".join("b%d: *x%d\n" % (i, i) for i in range(90000)))
with open(t + "/r2_blocks.yaml", "w") as f:
    f.write("name: blocks\ndevice: cpu\ndata:\n  train: {path: %s/s.h5, group: /train}\n" % t)
    f.write("model:\n  input: [1, 8, 8]\n  blocks:\n")
    f.write("".join("    b%d: {layers: [relu]}\n" % i for i in range(45000)))
    f.write("  layers:\n    - flatten\n" + "".join("    - b%d\n" % (44999 - i) for i in range(45000)))
    f.write("    - dense: {units: 10}\ntrain: {batch_size: 16, steps: 2, optimizer: {lr: 0.1}}\n")
EOF
    kase r2.map.duplicate 2 - "re:^gpurun: $(rx "$T/r2_dup.yaml"):199999:1: k5: duplicate key \(first given at line 6\)" -- \
        "$G" validate --no-data "$T/r2_dup.yaml"
    kase r2.map.unknown 2 - "re:^gpurun: $(rx "$T/r2_unknown.yaml"):1:1: k0: unknown key" -- \
        "$G" validate --no-data "$T/r2_unknown.yaml"
    kase r2.map.nodes 2 - "re:^gpurun: $(rx "$T/r2_nodes.yaml"):200000:[0-9]+: k199999: more than 200000 YAML nodes" -- \
        "$G" validate --no-data "$T/r2_nodes.yaml"
    kase r2.map.anchors 2 - "re:^gpurun: $(rx "$T/r2_anchors.yaml"):145000:9: b54999: alias '\*x54999' expands to more than 200000 YAML nodes" -- \
        "$G" validate --no-data "$T/r2_anchors.yaml"
    victim r2_dupv
    kase r2.map.duplicate_run 2 "$V" "re:^gpurun: $(rx "$T/r2_dup.yaml"):199999:1: k5: duplicate key" -- \
        "$G" "$T/r2_dup.yaml" --run-dir "$V" --resume auto --quiet
    kase r2.map.blocks 0 - -- "$G" validate --no-data "$T/r2_blocks.yaml"
    big=$T/r2_bigcfg
    rm -rf "$big" && cp -a "$T/tmpl" "$big"
    "$PY" -c 'import sys; open(sys.argv[1], "a").write("".join("x%d: %d\n" % (i, i) for i in range(150000)))' \
        "$big/config.yaml"
    kase r2.map.summarize 0 "$big" -- "$G" summarize "$big" "$T/tmpl" --json
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(not (len(r) == 2 and r[0]["x149999"] == 149999 and r[1]["x149999"] is None))' \
        "$OUT" && pass r2.map.summarize_rows "x149999 there and not" || fail r2.map.summarize_rows "$(head -c 300 "$OUT")"

    # ---------------------------------------------------------------- count (item 9)
    for i in 16777215T 16777216TiB 18446744073709551616 9223372036854775808 1e19 1000000T 0x10; do
        kase "r2.count.memory_$i" 2 - "--memory" "got '$i'" -- "$G" plan "$T/base.yaml" --memory "$i"
        [ -s "$OUT" ] && fail "r2.count.memory_${i}_early" "the plan was printed before the refusal" ||
            pass "r2.count.memory_${i}_early" "nothing on stdout"
    done
    kase r2.count.top 2 - "--top" "4294967297" -- \
        "$G" predict "$T/base.yaml" --checkpoint "$T/tmpl/weights.h5" --top 4294967297 "$T/s.h5:/test"
    victim r2_counts
    kase r2.count.threads 2 "$V" "--threads" "18446744073709551617" -- \
        "$G" "$T/base.yaml" --threads 18446744073709551617 --run-dir "$V" --resume auto --quiet
    kase r2.count.profile 2 "$V" "--profile" "99999999999999999999" -- \
        "$G" "$T/base.yaml" --profile 99999999999999999999 --run-dir "$V" --resume auto --quiet
    # KEY=VALUE and the key as the message names it
    for i in "seed=18446744073709551616 seed" "seed=-1 seed" "train.steps=9223372036854775808 train\.steps" \
        "train.batch_size=99999999999999999999 train\.batch_size" "data.workers=4294967298 data\.workers" \
        "parallel.bucket_mb=1e300 parallel\.bucket_mb" "parallel.bucket_mb=1048577 parallel\.bucket_mb" \
        "model.input=[1,8,18446744073709551617] model\.input\[2\]"; do
        a=${i%% *}
        b=${a##*[=,]}
        kase "r2.count.set_$a" 2 "$V" "re:^gpurun: --set:1:[0-9]+: ${i#* }: " "got ${b%]}" -- \
            "$G" "$T/base.yaml" --set "$a" --run-dir "$V" --resume auto --quiet
    done
    kase r2.count.set_index 2 "$V" "99999999999999999999" -- \
        "$G" "$T/base.yaml" --set model.layers.99999999999999999999.dense.units=3 --run-dir "$V" --resume auto --quiet
    job r2_steps "s/steps: 40/steps: 99999999999999999999/"
    kase r2.count.spec_steps 2 "$V" "re:^gpurun: $(rx "$T/r2_steps.yaml"):15:[0-9]+: train\.steps: " "99999999999999999999" -- \
        "$G" "$T/r2_steps.yaml" --run-dir "$V" --resume auto --quiet
    kase r2.count.env_memory 2 "$V" "GPURUN_MEMORY_LIMIT" "18446744073709551616" -- \
        env GPURUN_MEMORY_LIMIT=18446744073709551616 "$G" "$T/base.yaml" --run-dir "$V" --resume auto --quiet
    # OPTION VALUE, and what the message quotes of the value
    for i in "--n 99999999999999999999 =" "--n 9223372036854775807 =" "--shape 1,8,18446744073709551617 18446744073709551617" \
        "--shape 4294967297,1,1 =" "--classes 4294967298 =" "--test 99999999999999999999 =" \
        "--seed 18446744073709551616 ="; do
        set -- $i
        a=$1 c=$2 b=$2
        [ "$3" = = ] || b=$3
        set -- --n 16 --shape 1,4,4 "$a" "$c"
        [ "$a" = --shape ] && set -- --n 16 "$a" "$c"
        [ "$a" = --n ] && set -- --shape 1,4,4 "$a" "$c"
        kase "r2.count.data_${a}_$c" 2 - "$a" "$b" -- "$G" data synthetic "$T/r2_syn.h5" "$@"
        [ ! -e "$T/r2_syn.h5" ] || { fail "r2.count.data_${a}_${c}_written" "$T/r2_syn.h5 written"; rm -f "$T/r2_syn.h5"; }
    done
    for i in 99999999999999999999x200 800x18446744073709551617 4294967496x300; do
        kase "r2.count.plot_size_$i" 2 - "--size" "$i" -- "$G" plot "$T/tmpl" -o "$T/r2_plot.png" --size "$i"
    done
    [ ! -e "$T/r2_plot.png" ] && pass r2.count.plot_none "no PNG written" || fail r2.count.plot_none "$T/r2_plot.png written"
    unset -f r2_path r2_empty
}
