#!/usr/bin/env bash
# check_layering.sh — the layering of the source tree, checked over
# its includes, calls and sizes with grep and awk:
#   - graph/ and config/ include nothing from kernels/, exec/ or runner/, and
#     config/ nothing from graph/ (quoted includes, "../x/y.h" resolved);
#   - graph/ and config/ call (or declare) no function of kernels/backend.h,
#     exec/*.h or runner/*.h (nor any gr_backend_*, nor gr_plan_run: the
#     runtime);
#   - kernels/cpu and kernels/cuda include nothing of each other (they share
#     code through kernels/-level headers), kernels/ nothing of exec/ or runner/;
#   - tools/ (the offline commands: summarize, plot) includes only common/ and
#     config/, and is included only as tools/tools.h from runner/ (and by tests);
#   - dist/ (communication, the bucketed all-reduce) includes nothing of
#     runner/, tools/, dataio/ or checkpoints/;
#   - no two rooms (top-level directories; kernels/cpu and kernels/cuda each
#     one) reach each other through includes: no include circle spans two rooms;
#   - kernels/, graph/, config/ and exec/ call no exit(), _exit(), _Exit() or
#     quick_exit(): runner/ decides exits (GR_ASSERT's abort is fine);
#   - no C source (*.c, *.h, *.cu, *.cuh, tests and bench included) over
#     LAYERING_MAX_LINES (800) lines;
#   - the training loop, LAYERING_LOOP_FN (gr_train_run) in runner/*.c, at
#     most LAYERING_LOOP_LINES (120) lines, its first line to the closing
#     brace at column 0.
# Comments and string literals are ignored (a comment may name exit()).
# Prints each violation as `layering: FILE:LINE: RULE` (FILE relative to the
# root), then their count; exits 1 if there is any, 0 otherwise.
#
#   bash tests/check_layering.sh [SOURCE_ROOT]   (default: this script's parent directory)
set -u
ROOT=${1:-$(dirname "$0")/..}
cd "$ROOT" || { echo "check_layering.sh: $ROOT: no such directory" >&2; exit 2; }
MAX_LINES=${LAYERING_MAX_LINES:-800}
LOOP_FN=${LAYERING_LOOP_FN:-gr_train_run}
LOOP_LINES=${LAYERING_LOOP_LINES:-120}
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT

# The C sources: what git tracks or would track (new files too), else every
# one outside build*/ and hidden directories
# (git's list only at the top of a work tree: a tree inside an ignored folder is found)
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
    git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' '*.cuh' | sort -u >"$TMP/all"
else
    find . -type d \( -name 'build*' -o -name '.?*' \) -prune -o -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's#^\./##' | sort >"$TMP/all"
fi
[ -s "$TMP/all" ] || { echo "check_layering.sh: no C sources under $(pwd)" >&2; exit 2; }
# (files listed by git but deleted in the work tree are not there to read)
while IFS= read -r f; do [ -f "$f" ] && echo "$f"; done <"$TMP/all" >"$TMP/files"
in_dirs() { grep -E "^($(echo "$*" | tr ' ' '|'))/" "$TMP/files"; }

# strip(line): the line without comments (state kept across lines in incom:
# reset it at each file's first line) and with string and character literals
# emptied.
STRIP='
function strip(s,    out, i, n, c, q, j) {
    out = ""; n = length(s); i = 1
    while (i <= n) {
        if (incom) {
            j = index(substr(s, i), "*/")
            if (!j) return out
            i += j + 1; incom = 0; out = out " "; continue
        }
        c = substr(s, i, 2)
        if (c == "/*") { incom = 1; i += 2; continue }
        if (c == "//") return out
        c = substr(s, i, 1)
        if (c == "\"" || c == "'"'"'") {
            q = c; i++
            while (i <= n && substr(s, i, 1) != q) i += substr(s, i, 1) == "\\" ? 2 : 1
            out = out q q; i++; continue
        }
        out = out c; i++
    }
    return out
}
'

# ---- includes: each quoted include resolved against the including file's
# directory, then the root (the build's include path)
awk -v listfile="$TMP/files" "$STRIP"'
function norm(p,    n, k, parts, out, m, i) {
    n = split(p, parts, "/"); m = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == ".." && m > 0 && out[m] != "..") { m--; continue }
        out[++m] = parts[i]
    }
    p = ""
    for (i = 1; i <= m; i++) p = p (i > 1 ? "/" : "") out[i]
    return p
}
function room(p,    parts) {  # graph, config, kernels/cpu, kernels/cuda, kernels, exec, runner, ...
    split(p, parts, "/")
    if (parts[1] == "kernels" && (parts[2] == "cpu" || parts[2] == "cuda") && parts[3] != "") return "kernels/" parts[2]
    return parts[1]
}
BEGIN { while ((getline f < listfile) > 0) have[f] = 1 }
FNR == 1 { incom = 0; dir = FILENAME; sub(/\/?[^\/]*$/, "", dir) }
{
    s = strip($0)
    if (s !~ /^[ \t]*#[ \t]*include[ \t]*""/) next
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
    t = norm((dir == "" ? "" : dir "/") inc)
    if (!(t in have) && (norm(inc) in have)) t = norm(inc)
    from = room(FILENAME); to = room(t); top = to; sub(/\/.*$/, "", top)
    why = ""
    if ((from == "graph" || from == "config") && (top == "kernels" || top == "exec" || top == "runner"))
        why = "graph/ and config/ include nothing from kernels/, exec/ or runner/"
    else if (from == "config" && top == "graph")
        why = "config/ includes nothing from graph/"
    else if ((from == "kernels/cpu" && to == "kernels/cuda") || (from == "kernels/cuda" && to == "kernels/cpu"))
        why = "kernels/cpu and kernels/cuda share code only through kernels/-level headers"
    else if ((from ~ /^kernels/) && (top == "exec" || top == "runner"))
        why = "kernels/ includes nothing from exec/ or runner/"
    else if (from == "dist" && (top == "runner" || top == "tools" || top == "dataio" || top == "checkpoints"))
        why = "dist/ (communication, the bucketed all-reduce) stands on exec/ and below, never on runner/"
    else if (from == "tools" && top != "tools" && top != "common" && top != "config")
        why = "tools/ is offline: it reads run directories with common/ and config/ alone"
    else if (top == "tools" && from != "tools" && !(from == "runner" && t == "tools/tools.h") && from != "tests")
        why = "the offline tools are reached through tools/tools.h, from runner/ alone"
    if (why != "") printf "layering: %s:%d: %s/ includes %s (%s)\n", FILENAME, FNR, from, t, why
    # the rooms each room reaches by an include, for the circles below
    if (from != to && !((from, to) in edge)) {
        edge[from, to] = FILENAME ":" FNR " includes " t; at[from, to] = FILENAME ":" FNR; rooms[from]; rooms[to]
    }
}
END {
    # an include circle through two rooms: room a reaches room b and b reaches a (the closure of the
    # room graph), reported once per pair with an include of each way
    for (a in rooms) for (b in rooms) reach[a, b] = ((a, b) in edge)
    for (k in rooms) for (a in rooms) if (reach[a, k]) for (b in rooms) if (reach[k, b]) reach[a, b] = 1
    for (a in rooms) for (b in rooms)
        if (a < b && reach[a, b] && reach[b, a])
            printf "layering: %s: rooms %s/ and %s/ include each other (an include circle spans two rooms: %s; %s)\n", \
                (a, b) in at ? at[a, b] : at[b, a], a, b, (a, b) in edge ? edge[a, b] : a "/ reaches " b "/", (b, a) in edge ? edge[b, a] : b "/ reaches " a "/"
}' $(cat "$TMP/files") >>"$TMP/out"

# ---- calls from graph/ and config/ into the backend, the runtime or the runner
for h in kernels/backend.h exec/*.h runner/*.h; do
    [ -f "$h" ] && awk "$STRIP"'FNR == 1 { incom = 0 } { print strip($0) }' "$h"
done | grep -oE '\bgr_[a-z0-9_]+\([^*]' | sed 's/(.$//' | sort -u >"$TMP/runtime_fns"  # not "gr_status (*fn)"
{ cat "$TMP/runtime_fns"; echo gr_plan_run; } | sort -u | grep . >"$TMP/fns"
FNS=$(paste -sd'|' "$TMP/fns")
GRAPH_SRC=$(in_dirs graph config)
if [ -n "$GRAPH_SRC" ]; then
    awk -v fns="$FNS" "$STRIP"'
    FNR == 1 { incom = 0 }
    {
        s = strip($0)
        while (match(s, "(^|[^A-Za-z0-9_])(gr_backend_[a-z0-9_]+|" fns ")[ \t]*\\(")) {
            name = substr(s, RSTART, RLENGTH); sub(/^[^g]*/, "", name); sub(/[ \t]*\($/, "", name)
            printf "layering: %s:%d: uses %s (graph/ and config/ use no function of kernels/backend.h, exec/ or runner/)\n", FILENAME, FNR, name
            s = substr(s, RSTART + RLENGTH)
        }
    }' $GRAPH_SRC >>"$TMP/out"
fi

# ---- exits outside runner/
EXIT_SRC=$(in_dirs kernels graph config exec)
if [ -n "$EXIT_SRC" ]; then
    awk "$STRIP"'
    FNR == 1 { incom = 0 }
    {
        s = strip($0)
        if (match(s, /(^|[^A-Za-z0-9_])(exit|_exit|_Exit|quick_exit)[ \t]*\(/)) {
            name = substr(s, RSTART, RLENGTH); sub(/^[^A-Za-z_]*/, "", name); sub(/[ \t]*\($/, "", name)
            printf "layering: %s:%d: calls %s() (only runner/ decides exits; return a gr_status)\n", FILENAME, FNR, name
        }
    }' $EXIT_SRC >>"$TMP/out"
fi

# ---- file sizes
xargs wc -l <"$TMP/files" | awk -v max="$MAX_LINES" '$2 != "total" && $1 > max {
    printf "layering: %s:%d: %d lines, over %d (split it along its seams)\n", $2, $1, $1, max }' >>"$TMP/out"

# ---- the training loop's length
LOOP_SRC=$(grep -E '^runner/[^/]*\.c$' "$TMP/files")
if [ -z "$LOOP_SRC" ] || ! awk -v fn="$LOOP_FN" -v max="$LOOP_LINES" '
    # the definition: a line at column 0 naming fn( that is no declaration (no ";" before its body)
    !start && $0 ~ "^[A-Za-z_].*[^A-Za-z0-9_]" fn "[ \t]*\\(" && $0 !~ /;[ \t]*$/ { start = FNR; file = FILENAME }
    start && FILENAME == file && /^}/ {
        n = FNR - start + 1
        if (n > max) printf "layering: %s:%d: %s is %d lines (%d-%d), over %d\n", file, start, fn, n, start, FNR, max
        found = 1; exit
    }
    END { exit !found }' $LOOP_SRC >>"$TMP/out"; then
    echo "layering: runner/: 0: no definition of $LOOP_FN found (LAYERING_LOOP_FN names the training loop)" >>"$TMP/out"
fi

# ---- a clone is whole: no file of the repository names the team's folder beside it (a user's
# clone has none), and the PyTorch references the bench scripts call are in bench/
(cd "$ROOT" && grep -rnI --exclude-dir=.git --exclude-dir='build*' -e '\.\./share[d]/' . | sed 's#^\./##' |
    awk -F: '{ printf "layering: %s:%s: names a path outside the repository\n", $1, $2 }') >>"$TMP/out"
for ref in $(cd "$ROOT" && grep -ho 'bench/torch_[a-z_]*\.py' bench/*.sh 2>/dev/null | sort -u); do
    [ -f "$ROOT/$ref" ] || echo "layering: bench/: 0: $ref, which a bench script runs, is missing" >>"$TMP/out"
done

N=$(grep -c . "$TMP/out")
if [ "$N" -gt 0 ]; then
    cat "$TMP/out"
    echo "layering: $N violations in $(wc -l <"$TMP/files") C sources"
    exit 1
fi
echo "layering: ok ($(wc -l <"$TMP/files") C sources)"
