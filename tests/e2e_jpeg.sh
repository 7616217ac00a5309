#!/usr/bin/env bash
# e2e_jpeg.sh — `gpurun data imagefolder --store jpeg` on the command line
# (DESIGN 1.1, 1.5): its option errors exit 2 naming the option, a conversion
# writes an encoded image split, and a job (`gpurun plan`, `gpurun run`) given
# one exits 3 naming the file: the loader does not decode them yet. The
# round trip itself is test_convert_imagefolder_encoded's. No Python needed.
#
#   bash tests/e2e_jpeg.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

# a 12x8 RGB JPEG (libjpeg, quality 80), in two class folders
JPEG=/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQFxQYGBcUFhYaHSUfGhsjHBYWICwgIyYnKSopGR8tMC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCj/wAARCAAIAAwDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDz74P/APLD8K+vfDP/ACCIaKK2Mj//2Q==
mkdir -p "$T/pics/a" "$T/pics/b"
for c in a b; do for i in 1 2 3; do echo "$JPEG" | base64 -d >"$T/pics/$c/$i.jpg"; done; done
I=$T/enc.h5

expect_fail 2 "--store: expected raw or jpeg, got 'webp'" -- "$G" data imagefolder "$I" --from "$T/pics" --store webp
expect_fail 2 "--max-side applies only with --store jpeg" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --size 8 --max-side 64
expect_fail 2 "--quality applies only with --store jpeg" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --size 8 --quality 80
expect_fail 2 "--size does not apply with --store jpeg" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --size 8
expect_fail 2 "--quality: expected a JPEG quality 1..100, got '0'" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --quality 0
expect_fail 2 "--max-side: expected a count >= 1, got '0'" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --max-side 0
expect_fail 2 "--max-side: expected 1..32768" -- \
    "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --max-side 40000
check "no output after option errors" test ! -e "$I"

expect_ok "wrote $I" -- "$G" data imagefolder "$I" --from "$T/pics" --store jpeg --max-side 8 --quality 85
{
    echo "name: enc"
    echo "data:"
    echo "  train: {path: $I, group: /train}"
    echo "model:"
    echo "  layers: [flatten, {dense: {units: 2}}]"
    echo "train: {batch_size: 2, steps: 1, optimizer: {type: sgd, lr: 0.1}}"
} >"$T/enc.yaml"
expect_fail 3 "$I: group /train is an encoded image split" "the loader does not read encoded (JPEG) splits yet" -- \
    "$G" plan "$T/enc.yaml"
expect_fail 3 "the loader does not read encoded (JPEG) splits yet" -- "$G" "$T/enc.yaml" --run-dir "$T/run"
e2e_done
