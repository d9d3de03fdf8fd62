"""The `hf` rollout engine: the trainer's own policies and the exact sampler.

Generation runs in this process on the policy's module (`PolicySet.use`), in chunks of
`rollout_batch` rows (0: all at once). Rows are independent (per-row seeds, left padding,
own budgets), so a chunk samples what the whole call would, with a smaller KV cache. The
log-probs it returns are the trainer's own, so nothing needs recomputing, and an update is
seen at once (the engine holds the very modules that are trained). The engine keeps one
`Decoding` for its life: the token picker checked once on its device, and whether CUDA graph
capture still works there.
"""

from __future__ import annotations

from trainer.sampling import Decoding, Sample, generate


class HFEngine:
    recomputes_logprobs = False
    startup_seconds = 0.0

    def __init__(self, policies, rollout_batch: int = 0):
        self.policies = policies
        self.rollout_batch = rollout_batch  # rows per generate call; 0 = all
        self.calls = 0
        self.decoding: Decoding | None = None  # chosen on the first call's device

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
    ) -> list[Sample]:
        size = self.rollout_batch or len(prompts)
        results: list[Sample] = []
        with self.policies.use(policy) as model:
            if self.decoding is None:
                self.decoding = Decoding.for_device(next(model.parameters()).device)
            for k in range(0, len(prompts), max(1, size)):
                results += generate(
                    model,
                    prompts[k : k + size],
                    seeds=seeds[k : k + size],
                    max_new_tokens=max_new_tokens[k : k + size],
                    temperature=temperature,
                    eos_ids=eos_ids,
                    pad_id=pad_id,
                    decoding=self.decoding,
                )
                self.calls += 1
        return results

    def generate_many(
        self, jobs, *, temperature: float, eos_ids: list[int], pad_id: int
    ) -> list[list[Sample]]:
        """Each job is (policy, prompts, seeds, budgets): one after the other, in order."""
        return [
            self.generate(
                policy,
                prompts,
                seeds=seeds,
                max_new_tokens=budgets,
                temperature=temperature,
                eos_ids=eos_ids,
                pad_id=pad_id,
            )
            for policy, prompts, seeds, budgets in jobs
        ]

    def policies_changed(self, names: list[str]) -> None:
        """Nothing to do: the engine generates with the trained modules themselves."""

    def close(self) -> None:
        """Nothing to stop."""
