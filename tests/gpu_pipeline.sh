#!/usr/bin/env bash
# gpu_pipeline.sh — pipeline parallelism between GPUs (ctest label gpu, CUDA builds): the small
# GPT of e2e_pipeline.sh on 2 stages, a GPU each (`mpirun -np 2`, the stages' messages over NCCL
# send/recv on a communicator split from the world's), against one process on one GPU: the same
# losses within 1e-5 (the kernels of one process and of two are the same, their sums too, so this
# is expected bit for bit; cuBLAS may pick other algorithms per process), every weight within 1e-5,
# and the pipeline's figures in summary.json. A tensor group on GPUs is refused (exit 2) until its
# sums run there. Skipped (77) without 2 GPUs or mpirun.
#
#   bash tests/gpu_pipeline.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
e2e_need_mpirun
if ! command -v nvidia-smi >/dev/null || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 2 ]; then
    echo "SKIP: fewer than 2 GPUs (nvidia-smi -L)"
    exit 77
fi
PC=$SRC/tests/parallel_check.py
e2e_text_h5 "$T/text.h5" "two stages on two gpus send activations forward and gradients back"
cat >"$T/gpt.yaml" <<EOF2
name: gpt
seed: 7
device: cuda
$(e2e_tiny_gpt "$T/text.h5" 2 "")
train:
  batch_size: 32
  micro_batch: 4
  steps: 12
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
  metrics: []
eval: {every_steps: 12}
log: {every_steps: 1, tensorboard: false}
EOF2
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/one" --quiet --set cuda_graph=false
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/pp2" --quiet --set parallel.pipeline=2
check "2 stages on 2 GPUs: the losses of one GPU within 1e-5" "$PY" "$PC" losses "$T/one" "$T/pp2" 1e-5
check "... and its weights within 1e-5" "$PY" "$PC" weights "$T/one" "$T/pp2" 1e-5
check "summary.json: 2 stages, 8 micro-batches" grep -q '"pipeline_stages":2,"pipeline_microbatches":8' \
    "$T/pp2/summary.json"
expect 2 "parallel.tensor: 2: tensor parallelism runs on CPUs only yet" -- \
    "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/tp2" --quiet --set parallel.tensor=2
e2e_done
