"""The memory estimate (trainer/memory.py): close to measured peaks, and a run that cannot fit
is refused before it starts, with one message for the form, the API and the CLI."""

from __future__ import annotations

import pytest

from tests.trainer.memory_probe import COMPLETION, PROMPT, SHAPE, build, measured_peak, turns_for
from trainer.cli import main
from trainer.config import ConfigError, expand_matrix, make_config
from trainer.memory import estimate, fit_problem, lora_parameter_count, parameter_count

BIG = dict(model="Qwen/Qwen3-4B", finetune="full", sharing="per_role", workflow="voting")


@pytest.mark.parametrize(
    "finetune, checkpointing, workflow, sharing",
    [
        ("lora", "off", "single", "shared"),
        ("lora", "on", "voting", "per_role"),
        ("full", "off", "voting", "shared"),
        ("full", "on", "voting", "per_role"),
    ],
)
def test_the_estimate_is_within_a_quarter_of_the_measured_peak(
    finetune, checkpointing, workflow, sharing
):
    config = make_config(
        workflow=workflow,
        sharing=sharing,
        finetune=finetune,
        grad_checkpointing=checkpointing,
        micro_batch_size=8,
        lora_r=8,
        max_new_tokens=COMPLETION,
        lr=1e-3,
        warmup_steps=0,
    )
    policies = build(config)
    measured = measured_peak(policies, config, turns_for(config, 8))
    estimated = estimate(config, SHAPE, on_cuda=False, sequence=(PROMPT, COMPLETION)).total
    assert 0.75 <= estimated / measured <= 1.25, (estimated, measured)


def test_fused_logprobs_lower_the_measured_peak_and_the_estimate_follows():
    # 64 turns a pass, 25 positions each read by the loss, over a 32,768-token vocabulary: the
    # whole logits are the update's largest term, Liger's chunks and the entropy's are not.
    shape = dict(SHAPE, vocab_size=32768)
    peaks, estimates = {}, {}
    for fused in (False, True):
        config = make_config(
            micro_batch_size=64,
            lora_r=8,
            max_new_tokens=COMPLETION,
            grad_checkpointing="off",
            fused_logprobs=fused,
        )
        peaks[fused] = measured_peak(build(config, shape), config, turns_for(config, 64))
        estimates[fused] = estimate(config, shape, on_cuda=False, sequence=(PROMPT, COMPLETION))
        assert 0.75 <= estimates[fused].total / peaks[fused] <= 1.25, (estimates[fused], peaks)
    assert peaks[True] < 0.6 * peaks[False]
    assert estimates[True].logits < 0.3 * estimates[False].logits


def test_parameter_counts_match_the_models():
    policies = build(make_config(finetune="lora", lora_r=8))
    model = policies.model.get_base_model()
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert parameter_count(SHAPE) == frozen
    assert lora_parameter_count(SHAPE, 8, "all-linear") == policies.trainable_parameter_count()


def test_the_published_qwen3_4b_has_about_four_billion_parameters():
    from trainer.memory import KNOWN_SHAPES

    assert 3.9e9 < parameter_count(KNOWN_SHAPES["Qwen/Qwen3-4B"]) < 4.1e9


def test_every_paper_lora_cell_fits_one_h200_and_4b_full_per_role_does_not():
    for model in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B"):
        for workflow in ("single", "voting", "eval_opt", "orch_workers"):
            make_config("paper", model=model, workflow=workflow)  # no ConfigError
    with pytest.raises(ConfigError) as caught:
        make_config("paper", **BIG)
    message = caught.value.errors["memory"]
    assert "GiB" in message and "finetune=lora" in message and "micro_batch_size" in message


def test_sharded_full_fine_tuning_divides_the_policies_memory_over_the_ranks():
    """FSDP2 (trainer/sharding.py): 4B per_role full fine-tuning fits on 4 sharded H200s."""
    from trainer.memory import model_shape, rollout_estimate

    with pytest.raises(ConfigError):
        make_config("paper", **BIG, world_size=2)
    four = make_config("paper", **BIG, world_size=4)  # no ConfigError
    one = make_config("paper", **{**BIG, "model": "Qwen/Qwen3-0.6B"})
    sharded = make_config("paper", **{**BIG, "model": "Qwen/Qwen3-0.6B"}, world_size=4)
    shape = model_shape(one.model)
    whole, quarter = estimate(one, shape), estimate(sharded, shape)
    assert quarter.optimizer == pytest.approx(whole.optimizer / 4, rel=1e-6)
    assert quarter.activations == whole.activations  # per micro-batch, not sharded
    # Generation runs on every policy all-gathered in bf16: counted in the rollout.
    gathered = 3 * parameter_count(shape) * 2
    resident_whole = rollout_estimate(one, shape).weights
    resident_quarter = rollout_estimate(sharded, shape).weights
    assert resident_quarter >= gathered and resident_quarter < resident_whole
    assert four.world_size == 4


def test_a_smaller_gpu_refuses_what_a_bigger_one_takes():
    config = make_config("paper", workflow="voting")
    assert fit_problem(config) is None
    assert "grad_snapshots=host" in fit_problem(config, capacity=16 * 2**30)
    assert fit_problem(make_config("paper", workflow="voting", device="cpu"), 2**30) is None


def test_the_refusal_is_the_same_from_the_form_api_path_and_the_cli(capsys):
    with pytest.raises(ConfigError) as direct:
        make_config("paper", **BIG)
    with pytest.raises(ConfigError) as matrix:  # what the form and the API call
        expand_matrix(
            {k: v for k, v in BIG.items() if k != "model"}, {"model": [BIG["model"]]}, "paper"
        )
    assert matrix.value.errors["memory"].startswith(direct.value.errors["memory"])
    flags = [f"--{k}={v}" for k, v in BIG.items()]
    assert main(["run", "--preset", "paper", *flags, "--out", "/nonexistent/never"]) == 2
    assert f"error: memory: {direct.value.errors['memory']}" in capsys.readouterr().err
