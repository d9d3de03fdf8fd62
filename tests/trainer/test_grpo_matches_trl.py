"""Our GRPO loss and gradient on the `single` workflow equal TRL's GRPOTrainer's.

Everything is offline: a tiny random Qwen3 saved to tmp_path, a word-level tokenizer built in
memory, a two-prompt in-memory dataset. TRL's `_compute_loss(model, inputs)` is called with
the inputs its own generation step would have produced (prompt/completion ids and masks,
advantages, sampling log-probs as `old_per_token_logps`, reference log-probs from its
`ref_model` when beta > 0); ours runs the same batch through `accumulate_gradients` with
micro-batches smaller than the batch. Loss type ↔ loss_agg: grpo ↔ seq-mean-token-mean,
bnpo ↔ token-mean, dr_grpo ↔ seq-mean-token-sum-norm, luspo ↔ seq-mean-token-sum.
"""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM
from trl import GRPOConfig, GRPOTrainer

from tests.trainer.tiny_qwen3 import tiny_qwen3
from trainer.config import make_config
from trainer.episode import Turn
from trainer.loss import token_logprobs
from trainer.policies import PolicySet
from trainer.update import accumulate_gradients

PAD, EOS = 0, 1
MAX_NEW = 8
TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny")
    vocab = {"<pad>": PAD, "<eos>": EOS, **{f"w{i}": i + 2 for i in range(62)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>"
    )
    tiny_qwen3(pad_token_id=PAD, eos_token_id=EOS, bos_token_id=EOS).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, tokenizer


def trl_trainer(path, tokenizer, out, *, loss_type, beta) -> GRPOTrainer:
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=6,
        num_generations=3,
        max_completion_length=MAX_NEW,
        temperature=TEMPERATURE,
        beta=beta,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type=loss_type,
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(
        model=str(path),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["w1 w2 w3 w4", "w5 w6 w7 w8"]}),
        processing_class=tokenizer,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what Trainer sets during training
    return trainer


def perturbed_state(model, seed: int) -> dict[str, torch.Tensor]:
    """Move the weights away from the saved ones, so a KL to the reference is non-trivial."""
    gen = torch.Generator().manual_seed(seed)
    return {
        n: p.detach() + 0.05 * torch.randn(p.shape, generator=gen)
        for n, p in model.named_parameters()
    }


CASES = [
    ("grpo", "seq-mean-token-mean", 0.0),
    ("grpo", "seq-mean-token-mean", 0.1),
    ("bnpo", "token-mean", 0.0),
    ("bnpo", "token-mean", 0.1),
    ("dr_grpo", "seq-mean-token-sum-norm", 0.0),
    ("luspo", "seq-mean-token-sum", 0.04),
]


@pytest.mark.parametrize(("loss_type", "loss_agg", "beta"), CASES)
def test_loss_and_gradient_equal_trl(saved, tmp_path, loss_type, loss_agg, beta):
    path, tokenizer = saved
    trainer = trl_trainer(path, tokenizer, tmp_path, loss_type=loss_type, beta=beta)
    weights = perturbed_state(trainer.model, seed=1)
    trainer.model.load_state_dict(weights, strict=False)

    # The batch: 2 prompts × 3 completions of different lengths (right padded).
    gen = torch.Generator().manual_seed(3)
    prompt_ids = torch.tensor([[3, 4, 5, 6]] * 3 + [[7, 8, 9, 10]] * 3)  # (B, P)
    lengths = [8, 3, 5, 1, 6, 4]
    completion_ids = torch.randint(2, 64, (6, MAX_NEW), generator=gen)  # (B, T)
    completion_mask = (torch.arange(MAX_NEW)[None] < torch.tensor(lengths)[:, None]).long()
    completion_ids = completion_ids.masked_fill(completion_mask == 0, PAD)
    prompt_mask = torch.ones_like(prompt_ids)
    advantages = torch.tensor([1.1, -0.6, -0.5, 0.9, 0.2, -1.1])
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    with torch.no_grad():
        current, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, attention_mask, MAX_NEW
        )
        # sampling log-probs a little off the current policy: ratios ≠ 1, some clipped
        old = (current + 0.3 * torch.randn(current.shape, generator=gen)) * completion_mask
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
        "old_per_token_logps": old,
    }
    if beta > 0:
        with torch.no_grad():
            inputs["ref_per_token_logps"], _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.ref_model, input_ids, attention_mask, MAX_NEW
            )

    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()
    trl_grads = {n: p.grad for n, p in trainer.model.named_parameters()}
    trl_entropy = trainer._metrics["train"]["entropy"][-1]

    # Ours: the same batch as `single` workflow turns on one shared, fully fine-tuned policy.
    config = make_config(
        workflow="single",
        sharing="shared",
        finetune="full",
        kl_beta=beta,
        loss_agg=loss_agg,
        max_new_tokens=MAX_NEW,
        temperature=TEMPERATURE,
        clip_low=0.2,
        clip_high=0.28,
        micro_batch_size=4,
    )
    policies = PolicySet(Qwen3ForCausalLM.from_pretrained(path), config, ["shared"])
    with policies.use("shared") as model:
        model.load_state_dict(weights, strict=False)  # the reference keeps the saved weights
    turns = []
    for i, n in enumerate(lengths):
        turns.append(
            Turn(
                role="solver",
                agent="solver",
                policy="shared",
                stage=0,
                prompt_ids=prompt_ids[i].tolist(),
                completion_ids=completion_ids[i, :n].tolist(),
                logprobs=old[i, :n].tolist(),
                advantage=float(advantages[i]),
            )
        )
    stats = accumulate_gradients(policies, "shared", turns, config, pad_id=PAD)["solver"]

    assert stats["loss"] == pytest.approx(float(trl_loss.detach()), rel=1e-5, abs=1e-7)
    assert stats["entropy"] / stats["tokens"] == pytest.approx(trl_entropy, rel=1e-5)
    if loss_type == "grpo":
        clip_key = "clip_ratio/region_mean"
        assert stats["clipped"] / stats["tokens"] == pytest.approx(
            trainer._metrics["train"][clip_key][-1]
        )
    if beta > 0:
        assert stats["kl"] / stats["tokens"] == pytest.approx(
            trainer._metrics["train"]["kl"][-1], rel=1e-5
        )
        assert stats["kl"] > 0
    with policies.use("shared") as model:
        ours = {n: p.grad for n, p in model.named_parameters()}
    assert set(ours) == set(trl_grads)
    for name, grad in trl_grads.items():
        # float32 sums run in another order (TRL's chunked fused head): tolerance at grad's scale
        atol = 1e-5 * float(grad.abs().max()) + 1e-9
        torch.testing.assert_close(
            ours[name], grad, rtol=1e-4, atol=atol, msg=lambda m: f"{name}: {m}"
        )
    assert any(float(g.abs().max()) > 0 for g in trl_grads.values())


def test_token_logprobs_equal_trl_and_ignore_left_padding(saved, tmp_path):
    path, tokenizer = saved
    trainer = trl_trainer(path, tokenizer, tmp_path, loss_type="grpo", beta=0.0)
    model = Qwen3ForCausalLM.from_pretrained(path)
    input_ids = torch.tensor([[3, 4, 5, 6, 20, 21, 22], [7, 8, 9, 10, 30, 31, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 0]])
    with torch.no_grad():
        theirs, their_entropy, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, mask, 3, compute_entropy=True
        )
        ours, our_entropy = token_logprobs(model, input_ids, mask, 3, TEMPERATURE)
    valid = mask[:, -3:].bool()
    torch.testing.assert_close(ours[valid], theirs[valid])
    torch.testing.assert_close(our_entropy[valid], their_entropy[valid])

    # A left-padded prompt gives the same numbers as the bare row (position ids from the mask).
    padded = torch.tensor([[0, 0, 7, 8, 20, 21, 22]])
    padded_mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
    bare = torch.tensor([[7, 8, 20, 21, 22]])
    with torch.no_grad():
        a, _ = token_logprobs(model, padded, padded_mask, 3, TEMPERATURE)
        b, _ = token_logprobs(model, bare, torch.ones_like(bare), 3, TEMPERATURE)
    torch.testing.assert_close(a, b)
