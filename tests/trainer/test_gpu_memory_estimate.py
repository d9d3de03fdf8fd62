"""The memory estimate against peaks measured on an H200 (bench/gpu_check.py, 2026-12-04):
each phase's measured peak ≤ its estimate, and the run's estimate ≤ 1.3 × the run's peak.

The peaks are recorded data (max_memory_allocated of the timed steps, less the bench's own GPU
copy of the trainable weights, which it then held); the estimate is deterministic, so a change
to trainer/memory.py that lets a measured run out of its bound fails here, on any machine."""

from __future__ import annotations

import pytest

from trainer.config import make_config
from trainer.memory import (
    estimate,
    lora_parameter_count,
    model_shape,
    parameter_count,
    rollout_estimate,
)

GIB = 2**30
H200_GIB = 143771 / 1024
# case, checkpointing as run, longest (prompt, completion), generation calls, peaks in GiB
# (update, rollout) as measured, bench copy included
MEASURED = [
    ("Qwen/Qwen3-0.6B:lora:shared:single:16x8", False, (19, 96), [(128, 19, 96)], 34.686, 3.674),
    ("Qwen/Qwen3-0.6B:full:shared:single:16x8", True, (19, 96), [(128, 19, 96)], 18.979, 12.781),
    (
        "Qwen/Qwen3-0.6B:lora:per_role:voting:4x4",
        False,
        (27, 96),
        [(16, 27, 96), (48, 19, 96)],
        7.518,
        3.439,
    ),
    (
        "Qwen/Qwen3-0.6B:full:per_role:voting:4x4",
        False,
        (27, 96),
        [(16, 27, 96), (48, 19, 96)],
        33.481,
        20.431,
    ),
    ("Qwen/Qwen3-4B:lora:shared:single:8x8", True, (19, 96), [(64, 19, 96)], 15.326, 11.622),
    ("Qwen/Qwen3-4B:full:shared:single:8x8", True, (19, 96), [(64, 19, 96)], 77.802, 70.273),
]


@pytest.mark.parametrize("case, checkpointing, longest, calls, update_peak, rollout_peak", MEASURED)
def test_the_estimate_bounds_each_measured_peak_within_thirty_percent(
    monkeypatch, case, checkpointing, longest, calls, update_peak, rollout_peak
):
    monkeypatch.setenv("TROUPE_GPU_MEMORY_GB", str(H200_GIB))
    model, finetune, sharing, workflow, size = case.rsplit(":", 4)
    prompts, group = (int(n) for n in size.split("x"))
    config = make_config(
        "paper",
        workflow=workflow,
        task="math",
        dataset="synthetic",
        model=model,
        finetune=finetune,
        sharing=sharing,
        prompts_per_step=prompts,
        group_size=group,
        max_new_tokens=96,
        micro_batch_size=128,
        rollout_batch=0,
        warmup_steps=0,
        device="cuda",
    )
    shape = model_shape(model)
    policies = 2 if sharing == "per_role" else 1
    trainable = (
        lora_parameter_count(shape, 64, "all-linear")
        if finetune == "lora"
        else (parameter_count(shape))
    )
    bench_copy = policies * trainable * 4 / GIB
    update = estimate(config, shape, sequence=longest, checkpointing=checkpointing)
    rollout = rollout_estimate(config, shape, calls=calls, update=update)
    update_peak, rollout_peak = update_peak - bench_copy, rollout_peak - bench_copy
    assert update.total / GIB >= update_peak
    assert rollout.total / GIB >= rollout_peak
    ratio = max(update.total, rollout.total) / GIB / max(update_peak, rollout_peak)
    assert 1.0 <= ratio <= 1.3, ratio
