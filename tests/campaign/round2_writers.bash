# tests/campaign/round2_writers.bash — issue 23 items 3, 4 and 12: gpurun's writers and a
# hostile or odd output path. Sourced after tests/e2e_lib.bash and tests/campaign/lib.bash;
# round2_writers runs after camp_fixtures (it plots $T/tmpl). Each case failed before the fix:
#
#   writers.plot_symlink_tmp   (3) a symlink at OUT.tmp (plot's fixed temporary) to a victim file:
#                              exit 0, the victim's bytes unchanged, OUT a regular PNG file, the
#                              symlink as it was, no temporary left (the victim was overwritten
#                              with the PNG and OUT became the symlink)
#   writers.data_symlink_tmp   (3) the same for `gpurun data synthetic OUT`: OUT the conversion
#   writers.plot_fifo          (4) plot -o FIFO: exit 6 naming it, still a FIFO (was replaced, exit 0)
#   writers.plot_chardev       (4) plot -o a character device 1,3 (a private node like /dev/null;
#                              root only, else skipped): exit 6, still the device (as root,
#                              `plot -o /dev/null` replaced /dev/null with a PNG)
#   writers.data_fifo          (4) data synthetic FIFO, with and without --force: exit 3 naming
#                              it, still a FIFO, nothing written (with --force it was replaced)
#   writers.data_concurrent    (12) two conversions to one OUT at once with HDF5 file locking off
#                              (HDF5_USE_FILE_LOCKING=FALSE), different seeds, the first stopped
#                              (SIGSTOP) once its temporary exists while the second runs to its
#                              end, then continued: both exit 0, OUT is wholly the second's
#                              conversion after it and wholly one of the two at the end, no
#                              temporary left (they shared OUT.tmp: the first went on writing
#                              into the file the second had committed, then failed its rename)
#
# The victim of the chardev case is a node of our own, never the system's /dev/null: a
# regression would replace the node, not the device every other test writes to.

# r2_png FILE: FILE starts with the PNG signature
r2_png() { [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
# r2_leftovers DIR BASE: the temporaries of DIR/BASE there (BASE.tmp, BASE.<anything>.tmp), one line
r2_leftovers() { ls -A "$1" 2>/dev/null | grep -E "^$(rx "$2")\.(.+\.)?tmp$" | tr '\n' ' '; }
# r2_kind PATH: what PATH is (lstat)
r2_kind() { stat -c %F "$1" 2>/dev/null || echo missing; }
# r2_verdict NAME WHY: pass when WHY is empty, else fail with the last command's detail
r2_verdict() {
    if [ -z "$2" ]; then pass "$1" "exit $RC in $WALL s: $(said)"; else fail "$1" "$2"; detail; fi
}
# r2_same_h5 FILE REF...: FILE holds exactly what one REF holds (every dataset's values and
# every attribute, compared with h5py); prints which
r2_same_h5() {
    "$PY" - "$@" <<'EOF'
import sys
import h5py
import numpy as np

def items(path):
    out = {}
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out["data " + name] = (obj.dtype.str, obj.shape, obj[()].tobytes())
        for k, v in obj.attrs.items():
            out["attr " + name + "@" + k] = repr(v) if isinstance(v, (str, bytes)) else np.asarray(v).tobytes()
    with h5py.File(path, "r") as f:
        visit("/", f)
        f.visititems(visit)
    return out

try:
    got = items(sys.argv[1])
except Exception as e:
    print("unreadable: %s" % e)
    sys.exit(1)
for ref in sys.argv[2:]:
    if items(ref) == got:
        print(ref)
        sys.exit(0)
print("none of the references")
sys.exit(1)
EOF
}

r2_symlink_cases() {
    local W=$T/r2w why
    rm -rf "$W" && mkdir -p "$W"
    printf 'precious: the victim of a planted symlink\n' >"$W/victim"
    cp "$W/victim" "$W/victim.orig"
    # plot
    ln -s "$W/victim" "$W/p.png.tmp"
    CMD="$G plot $T/tmpl -o $W/p.png   (p.png.tmp a symlink to a victim file)"
    crun "$CT" "$G" plot "$T/tmpl" -o "$W/p.png"
    why=""
    [ "$RC" -eq 0 ] || why="exit $RC, expected 0"
    cmp -s "$W/victim" "$W/victim.orig" || why="${why:+$why; }the symlink's target was overwritten"
    [ -f "$W/p.png" ] && [ ! -L "$W/p.png" ] && r2_png "$W/p.png" ||
        why="${why:+$why; }OUT is not a regular PNG file ($(r2_kind "$W/p.png"))"
    [ "$(readlink "$W/p.png.tmp")" = "$W/victim" ] || why="${why:+$why; }the planted symlink was moved"
    [ "$(r2_leftovers "$W" p.png)" = "p.png.tmp " ] || why="${why:+$why; }left behind: $(r2_leftovers "$W" p.png)"
    r2_verdict writers.plot_symlink_tmp "$why"
    # data
    crun "$CT" "$G" data synthetic "$W/ref.h5" --n 200 --shape 1,8,8 --seed 4
    ln -s "$W/victim" "$W/d.h5.tmp"
    CMD="$G data synthetic $W/d.h5 --n 200 --shape 1,8,8 --seed 4   (d.h5.tmp a symlink to a victim file)"
    crun "$CT" "$G" data synthetic "$W/d.h5" --n 200 --shape 1,8,8 --seed 4
    why=""
    [ "$RC" -eq 0 ] || why="exit $RC, expected 0"
    cmp -s "$W/victim" "$W/victim.orig" || why="${why:+$why; }the symlink's target was overwritten"
    [ -f "$W/d.h5" ] && [ ! -L "$W/d.h5" ] || why="${why:+$why; }OUT is not a regular file ($(r2_kind "$W/d.h5"))"
    r2_same_h5 "$W/d.h5" "$W/ref.h5" >"$T/r2.cmp" 2>&1 || why="${why:+$why; }OUT is not the conversion: $(tail -n 1 "$T/r2.cmp")"
    [ "$(readlink "$W/d.h5.tmp")" = "$W/victim" ] || why="${why:+$why; }the planted symlink was moved"
    [ "$(r2_leftovers "$W" d.h5)" = "d.h5.tmp " ] || why="${why:+$why; }left behind: $(r2_leftovers "$W" d.h5)"
    r2_verdict writers.data_symlink_tmp "$why"
}

# r2_refused NAME CODE PATH KIND CMD...: CMD exits CODE naming PATH, which is still KIND, and
# no temporary of it is left
r2_refused() {
    local name=$1 code=$2 path=$3 kind=$4 why=""
    shift 4
    CMD="$*"
    crun "$CT" "$@"
    [ "$RC" -eq "$code" ] || why="exit $RC, expected $code"
    grep -qF -- "$path: " "$ERR" || why="${why:+$why; }stderr does not name $path"
    grep -qF "HDF5-DIAG" "$ERR" && why="${why:+$why; }HDF5 error stack printed"
    [ "$(r2_kind "$path")" = "$kind" ] || why="${why:+$why; }$path is now: $(r2_kind "$path")"
    [ -z "$(r2_leftovers "$(dirname "$path")" "$(basename "$path")")" ] ||
        why="${why:+$why; }left behind: $(r2_leftovers "$(dirname "$path")" "$(basename "$path")")"
    r2_verdict "$name" "$why"
}

r2_special_cases() {
    local W=$T/r2s
    rm -rf "$W" && mkdir -p "$W"
    mkfifo "$W/p.fifo" "$W/d.fifo"
    r2_refused writers.plot_fifo 6 "$W/p.fifo" fifo "$G" plot "$T/tmpl" -o "$W/p.fifo"
    r2_refused writers.data_fifo 3 "$W/d.fifo" fifo "$G" data synthetic "$W/d.fifo" --n 64 --shape 1,4,4
    r2_refused writers.data_fifo_force 3 "$W/d.fifo" fifo "$G" data synthetic "$W/d.fifo" --n 64 --shape 1,4,4 --force
    if [ "$(id -u)" -ne 0 ]; then
        skip writers.plot_chardev "not root: a character device cannot be made here (as root, plot -o /dev/null replaced it)"
        skip writers.data_chardev "not root"
    elif ! mknod "$W/null" c 1 3 2>/dev/null; then
        skip writers.plot_chardev "mknod is not permitted here"
        skip writers.data_chardev "mknod is not permitted here"
    else
        r2_refused writers.plot_chardev 6 "$W/null" "character special file" "$G" plot "$T/tmpl" -o "$W/null"
        r2_refused writers.data_chardev 3 "$W/null" "character special file" \
            "$G" data synthetic "$W/null" --n 64 --shape 1,4,4 --force
    fi
}

# r2_stop_at_tmp PID DIR BASE: stops PID (SIGSTOP) as soon as a temporary of DIR/BASE exists
# (5 ms polls, 20 s at most); false when PID ended first
r2_stop_at_tmp() {
    local i=0
    while kill -0 "$1" 2>/dev/null && [ -z "$(r2_leftovers "$2" "$3")" ] && [ $i -lt 4000 ]; do
        sleep 0.005
        i=$((i + 1))
    done
    kill -STOP "$1" 2>/dev/null && [ -n "$(r2_leftovers "$2" "$3")" ]
}

r2_concurrent_case() {
    local W=$T/r2c why="" p1 rc1 mid final
    local args=(--n 8000 --shape 3,32,32 --test 100 --force)
    rm -rf "$W" && mkdir -p "$W"
    crun 60 "$G" data synthetic "$W/a.h5" "${args[@]}" --seed 1
    [ "$RC" -eq 0 ] && crun 60 "$G" data synthetic "$W/b.h5" "${args[@]}" --seed 2
    [ "$RC" -eq 0 ] || { fail writers.data_concurrent "the reference conversions failed (exit $RC): $(said)"; return; }
    export HDF5_USE_FILE_LOCKING=FALSE
    "$G" data synthetic "$W/out.h5" "${args[@]}" --seed 1 </dev/null >"$T/r2c1.out" 2>"$T/r2c1.err" &
    p1=$!
    if ! r2_stop_at_tmp $p1 "$W" out.h5; then
        kill -CONT $p1 2>/dev/null
        reap $p1 30
        unset HDF5_USE_FILE_LOCKING
        skip writers.data_concurrent "the first conversion ended (exit $RC) before its temporary was seen"
        return
    fi
    CMD="$G data synthetic $W/out.h5 ${args[*]} --seed 2   (while the same with --seed 1 is stopped mid-write)"
    crun 60 "$G" data synthetic "$W/out.h5" "${args[@]}" --seed 2
    [ "$RC" -eq 0 ] || why="the second conversion: exit $RC, expected 0 ($(said))"
    mid=$(r2_same_h5 "$W/out.h5" "$W/b.h5" 2>&1 | tail -n 1)
    [ "$mid" = "$W/b.h5" ] || why="${why:+$why; }after the second conversion OUT is not its output: $mid"
    kill -CONT $p1
    reap $p1 60
    rc1=$RC
    unset HDF5_USE_FILE_LOCKING
    [ "$rc1" -eq 0 ] || why="${why:+$why; }the first conversion: exit $rc1, expected 0 ($(tail -n 1 "$T/r2c1.err" | cut -c1-150))"
    final=$(r2_same_h5 "$W/out.h5" "$W/a.h5" "$W/b.h5" 2>&1 | tail -n 1)
    case $final in
    "$W/a.h5" | "$W/b.h5") ;;
    *) why="${why:+$why; }OUT is wholly neither conversion: $final" ;;
    esac
    [ -z "$(r2_leftovers "$W" out.h5)" ] || why="${why:+$why; }left behind: $(r2_leftovers "$W" out.h5)"
    RC=$rc1
    if [ -z "$why" ]; then pass writers.data_concurrent "both exit 0; OUT is wholly $(basename "$final")"
    else fail writers.data_concurrent "$why"; detail; fi
    rm -f "$W"/*.h5
}

round2_writers() {
    r2_symlink_cases
    r2_special_cases
    r2_concurrent_case
}
