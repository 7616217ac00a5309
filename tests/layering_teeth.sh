#!/usr/bin/env bash
# layering_teeth.sh — check_layering.sh finds what it is for: on small trees
# made here (no git), a clean one passes, and each planted violation (an
# include circle through two rooms, tools/ reaching into runner/, tools/
# included from elsewhere than runner/, graph/ including kernels/, dist/
# reaching into runner/) is reported at its file and line, with exit 1.
#   bash tests/layering_teeth.sh TMPDIR
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=${1:?usage: layering_teeth.sh TMPDIR}
rm -rf "$TMP" && mkdir -p "$TMP" || exit 2
fails=0
check() { # what, want (a grep -E pattern of the output, or "ok"), tree
    local out rc
    out=$(bash "$HERE/check_layering.sh" "$3" 2>&1); rc=$?
    if [ "$2" = ok ]; then
        [ $rc -eq 0 ] && grep -q '^layering: ok' <<<"$out" && return
    else
        [ $rc -eq 1 ] && grep -qE "$2" <<<"$out" && return
    fi
    echo "FAIL: $1: rc $rc, output:"; echo "$out"; fails=$((fails + 1))
}
tree() { # a clean tree: common <- dataio <- runner -> tools, the training loop in runner/
    local d=$TMP/$1
    mkdir -p "$d/common" "$d/dataio" "$d/runner" "$d/tools" "$d/graph" "$d/kernels"
    printf '#include "c.h"\n' >"$d/common/c.c"; printf 'int c;\n' >"$d/common/c.h"
    printf '#include "../common/c.h"\n' >"$d/dataio/d.h"
    printf '#include "../tools/tools.h"\n#include "../dataio/d.h"\nint gr_train_run(void) {\n    return 0;\n}\n' >"$d/runner/main.c"
    printf '#include "../common/c.h"\n' >"$d/tools/tools.h"
    printf '#include "tools.h"\n' >"$d/tools/plot.c"
    printf 'int g;\n' >"$d/graph/g.h"; printf '#include "../graph/g.h"\n' >"$d/kernels/k.c"
    echo "$d"
}
check "a clean tree" ok "$(tree clean)"
d=$(tree circle); printf '#include "../dataio/d.h"\n' >>"$d/common/c.c"
check "common/ and dataio/ include each other" 'common/c.c:2: rooms common/ and dataio/ include each other' "$d"
d=$(tree toolsup); printf '#include "../runner/job.h"\n' >>"$d/tools/plot.c"; printf 'int j;\n' >"$d/runner/job.h"
check "tools/ includes runner/" 'tools/plot.c:2: tools/ includes runner/job.h' "$d"
d=$(tree toolsin); printf '#include "../tools/tools.h"\n' >>"$d/dataio/d.h"
check "dataio/ includes tools/" 'dataio/d.h:2: dataio/ includes tools/tools.h' "$d"
d=$(tree graphdown); printf '#include "../kernels/k.h"\n' >>"$d/graph/g.h"; printf 'int k;\n' >"$d/kernels/k.h"
check "graph/ includes kernels/ (and the circle it makes)" 'graph/g.h:2: graph/ includes kernels/k.h.*' "$d"
check "graph/ and kernels/ include each other" 'rooms graph/ and kernels/ include each other' "$d"
d=$(tree distup); mkdir -p "$d/dist"; printf '#include "../runner/job.h"\n' >"$d/dist/b.c"; printf 'int j;\n' >"$d/runner/job.h"
check "dist/ includes runner/" 'dist/b.c:1: dist/ includes runner/job.h' "$d"
[ $fails -eq 0 ] && echo "layering_teeth: 7 trees checked" || exit 1
