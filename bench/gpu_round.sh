#!/usr/bin/env bash
# The GPU round of per-role update, kernel and study measurements (bench/gpu_check.py's
# docstring says what each step measures), in two parts that each fit one 10-minute device
# call:
#   bash bench/gpu_round.sh updates   the GPU-only tests, then packed vs padded updates, LoRA
#                                     policies sharing passes vs one at a time, fused log-probs
#                                     vs the whole logits, Liger's kernels and compiled layers
#                                     vs the exact path: each pair alternated in one process
#   bash bench/gpu_round.sh study     the study's cases within a fixed budget, TRL beside
#   bash bench/gpu_round.sh           both
# Every result lands in ${OUT:-bench-out}/. A GPU image without Troupe's requirements takes
# the pure-Python wheels from ./wheels (`bash bench/gpu_round.sh wheels` downloads them where a
# registry is reachable; the device tool carries the ignored folder when told `carry: wheels`),
# installed without dependencies into /tmp/site, ahead of the image's own packages, so its
# CUDA torch and Triton stay as they are. DEVICE=cpu rehearses the round on the CPU: the tiny
# shape for every case, Liger's comparison (CUDA only) left out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out}
mkdir -p "$out"
python=${PYTHON:-python}
parts=${*:-updates study}
device=${DEVICE:-cuda}
shape_small=qwen3-0.6b shape_large=qwen3-4b
if [[ $device == cpu ]]; then
    shape_small=tiny shape_large=tiny
fi
if [[ " $parts " == *" wheels "* ]]; then
    # For the GPU image's Python (3.12), not this one: multiprocess ships one wheel a version.
    $python -m pip download --quiet --no-deps --only-binary=:all: -d wheels \
        --python-version "${GPU_PYTHON:-3.12}" transformers==5.24.0 trl==1.16.0 \
        datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 liger-kernel==0.8.5 \
        pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pygments==2.21.0
    ls wheels
    exit
fi
if [[ $device == cuda ]] && ls wheels/*.whl >/dev/null 2>&1; then
    $python -m pip install --quiet --no-deps --target /tmp/site wheels/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
run() {  # name, then gpu_check arguments; each step's own budget keeps the part inside a call
    local name=$1
    shift
    $python bench/gpu_check.py --json "$out/$name.json" "$@" 2>"$out/$name.err" | tee "$out/$name.txt"
}
if [[ " $parts " == *" updates "* ]]; then
    # Without tests/conftest.py: it needs Django, PostgreSQL and Redis, which the image has not.
    $python -m pytest -q -p no:cacheprovider --noconftest -o addopts=--import-mode=importlib \
        tests/trainer/test_kernels.py \
        tests/trainer/test_fused_sampling.py tests/trainer/test_packing.py \
        tests/trainer/test_joint_lora.py tests/trainer/test_head_logprobs.py 2>&1 | tail -5 |
        tee "$out/tests.txt"
    small=$shape_small large=$shape_large
    per_role=$small:lora:per_role:voting:4x4
    single=$small:lora:shared:single:16x8,$small:full:shared:single:16x8
    common=(--device "$device" --steps 3 --micro-batch-tokens 16384 --no-sampler-check)
    run packing --compare-packing "${common[@]}" --micro-batch 16 --budget-s 60 \
        --cases $per_role,$small:full:per_role:voting:4x4
    run passes --compare-passes "${common[@]}" --budget-s 60 \
        --cases $per_role,$large:lora:per_role:voting:4x4
    run logprobs --compare-logprobs "${common[@]}" --new-tokens 512 --budget-s 60 --cases $single
    if [[ $device == cuda ]]; then
        run liger --compare-kernels --kernels liger "${common[@]}" --budget-s 60 --cases $single
    fi
    run compile --compare-kernels --kernels compile "${common[@]}" --budget-s 60 \
        --cases $per_role,$small:full:shared:single:16x8
fi
if [[ " $parts " == *" study "* ]]; then
    study=(--study-size 16x8)
    if [[ $device == cpu ]]; then
        study=(--study-size 2x2 --steps 1 --new-tokens 4 --eval-problems 2)
    fi
    run study --study --device "$device" "${study[@]}" --micro-batch-tokens 16384 \
        --budget-s 420 --no-sampler-check
fi
