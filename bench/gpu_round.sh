#!/usr/bin/env bash
# The GPU round of per-role update, kernel and study measurements in one go (bench/gpu_check.py's
# docstring says what each step measures):
# the GPU-only tests, then packed vs padded updates, LoRA policies sharing passes vs one at a
# time, Liger's kernels against the exact path, fused log-probs against the whole logits,
# and
# the study's cases within a fixed budget. Every result lands in ${OUT:-bench-out}/.
# Wheels: liger-kernel (pure Python) from ./wheels if present, installed without dependencies
# so the node's CUDA torch and Triton stay as they are.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out}
mkdir -p "$out"
python=${PYTHON:-python}
if ls wheels/liger_kernel-*.whl >/dev/null 2>&1; then
    $python -m pip install --quiet --no-deps wheels/liger_kernel-*.whl
fi
$python -m pytest -q -p no:cacheprovider tests/trainer/test_kernels.py \
    tests/trainer/test_fused_sampling.py tests/trainer/test_packing.py \
    tests/trainer/test_joint_lora.py tests/trainer/test_head_logprobs.py 2>&1 | tail -5 | tee "$out/tests.txt"
run() {  # name, then gpu_check arguments; each step's own budget keeps the round inside a slot
    local name=$1
    shift
    $python bench/gpu_check.py --json "$out/$name.json" "$@" 2>"$out/$name.err" | tee "$out/$name.txt"
}
run packing --compare-packing --steps 3 --micro-batch 16 --micro-batch-tokens 16384 \
    --no-sampler-check --cases qwen3-0.6b:lora:per_role:voting:4x4,qwen3-0.6b:full:per_role:voting:4x4
run passes --compare-passes --steps 3 --micro-batch-tokens 16384 --no-sampler-check --budget-s 120 \
    --cases qwen3-0.6b:lora:per_role:voting:4x4,qwen3-4b:lora:per_role:voting:4x4
run liger --kernels liger --micro-batch-tokens 16384 --no-sampler-check --budget-s 90 \
    --cases qwen3-0.6b:lora:shared:single:16x8,qwen3-0.6b:full:shared:single:16x8
run logprobs --compare-logprobs --steps 3 --micro-batch-tokens 16384 --new-tokens 512 \
    --no-sampler-check --budget-s 90 \
    --cases qwen3-0.6b:lora:shared:single:16x8,qwen3-0.6b:full:shared:single:16x8
run study --study --study-size 16x8 --micro-batch-tokens 16384 --budget-s 300 --no-sampler-check
