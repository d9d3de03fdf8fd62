"""Rollout engines: what turns prompt token ids into sampled completions for the rollout.

Every generation call of the trainer (training rollouts and evaluation) goes through one
engine, chosen by `rollout_engine`:

- `hf` (`trainer/engines/hf.py`): the exact, reproducible sampler of `trainer/sampling.py` on
  the trainer's own policies. The default and the reference.
- `vllm` (`trainer/engines/vllm_engine.py`): vLLM in its own process and virtual environment, fed
  the policies' weights after each update. Its log-probs are not the trainer's (other
  kernels, bf16 on a GPU), so the trainer recomputes the old log-probs of every turn itself
  (`trainer/engines/old_logprobs.py`) and corrects for the mismatch with truncated
  importance sampling, as TRL does.

The interface (`RolloutEngine`):

    generate(policy, prompts, seeds=, max_new_tokens=, temperature=, eos_ids=, pad_id=)
        -> list[Sample]            one per prompt, with per-token sampling log-probs
    generate_many(jobs, temperature=, eos_ids=, pad_id=)
        -> list[list[Sample]]      jobs of (policy, prompts, seeds, budgets) at once: a
                                   stage's policies in one (mixed-adapter) batch where it can
    policies_changed(names)        after an update (or a checkpoint load): sync their weights
    close()                        stop whatever the engine started; idempotent
    recomputes_logprobs            whether the trainer must recompute the old log-probs
    startup_seconds                how long the engine took to start (0 for hf)
    calls                          generation calls made so far (the rollout's statistics)
"""

from __future__ import annotations

from typing import Protocol

from trainer.sampling import Sample


class RolloutEngine(Protocol):
    recomputes_logprobs: bool
    startup_seconds: float
    calls: int

    def generate(
        self,
        policy: str,
        prompts: list[list[int]],
        *,
        seeds: list[int],
        max_new_tokens: list[int],
        temperature: float,
        eos_ids: list[int],
        pad_id: int,
    ) -> list[Sample]: ...

    def generate_many(
        self, jobs: list[tuple], *, temperature: float, eos_ids: list[int], pad_id: int
    ) -> list[list[Sample]]: ...

    def policies_changed(self, names: list[str]) -> None: ...

    def close(self) -> None: ...


def make_engine(config, policies, model_path: str, on_status=None, log_dir=None) -> RolloutEngine:
    """The engine `config.rollout_engine` names, started (vLLM: its process is up)."""
    from trainer.engines.hf import HFEngine

    if config.rollout_engine == "hf":
        return HFEngine(policies, config.rollout_batch)
    if config.rollout_engine == "vllm":
        from trainer.engines.vllm_engine import VllmEngine

        return VllmEngine.start(config, policies, model_path, on_status=on_status, log_dir=log_dir)
    raise ValueError(f"unknown rollout_engine {config.rollout_engine!r}")
