#!/usr/bin/env bash
# gpu_pipeline.sh — pipeline parallelism between GPUs (ctest label gpu, CUDA builds): the small
# GPT of e2e_pipeline.sh on 2 stages, a GPU each (`mpirun -np 2`, the stages' messages over NCCL
# send/recv on a communicator split from the world's), against one process on one GPU: the same
# losses within 1e-5 (the kernels of one process and of two are the same, their sums too, so this
# is expected bit for bit; cuBLAS may pick other algorithms per process), every weight within 1e-5,
# and the pipeline's figures in summary.json. A tensor group of the 2 GPUs (its sums over NCCL, the
# whole model's slices through the host) within 1e-5 of one GPU, and in bf16 within 5e-3 of one
# bf16 GPU. Skipped (77) without 2 GPUs or mpirun.
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
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/tp2" --quiet --set parallel.tensor=2
check "a tensor group of 2 GPUs (its sums over NCCL): the losses of one GPU within 1e-5" \
    "$PY" "$PC" losses "$T/one" "$T/tp2" 1e-5
check "... and its weights (gathered through the host) within 1e-5" "$PY" "$PC" weights "$T/one" "$T/tp2" 1e-5
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/one-bf16" --quiet --set cuda_graph=false --set precision=bf16
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/tp2-bf16" --quiet --set parallel.tensor=2 \
    --set precision=bf16
check "a tensor group of 2 GPUs in bf16 (half parts summed in fp32 on the device): within 5e-3" \
    "$PY" "$PC" losses "$T/one-bf16" "$T/tp2-bf16" 5e-3
e2e_done
