"""The built-in tiny Qwen3-architecture models: tokenizer, warm-start, cache.

`tiny-s`, `tiny-m` and `tiny-l` are real `Qwen3ForCausalLM` models (≈0.4M / 3M / 13M
parameters) small enough to train with RL on two CPU cores. A random model cannot follow a
workflow, so each is warm-started by a short, deterministic supervised pass on the synthetic
role transcripts of `trainer/transcripts.py` (math and code, every role of every workflow).
The result is cached under `$TROUPE_DATA_DIR/models/<name>-<hash>/`, keyed by a hash of
everything that determines it, built on first use with a progress bar and reused after. A file
lock keeps two workers from building the same model at once.

The cache key hashes what the model is trained on, not the code that writes it: the corpus
itself (every (prompt, completion) pair, as JSON), this module's source (the tokenizer and the
SFT loop), the architecture, `RECIPE`, `RECIPE_VERSION` and the library versions that change
numerics. So a refactor of tasks, prompts or transcripts that leaves the corpus byte-identical
keeps the cached model (and proves it changed no behaviour), while any edit that changes one
character of the corpus builds a new one. The corpus digest takes a few seconds; it is
computed once a process.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

SPECS = {
    "tiny-s": dict(
        hidden_size=96,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
    ),
    "tiny-m": dict(
        hidden_size=192,
        intermediate_size=512,
        num_hidden_layers=6,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=32,
    ),
    "tiny-l": dict(
        hidden_size=384,
        intermediate_size=1024,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=48,
    ),
}
# The warm-start recipe. The corpus and this module's source are in the cache key by
# themselves; change RECIPE_VERSION for anything else that changes the model (e.g. a change
# in how `trainer.models` loads it).
RECIPE_VERSION = 1
RECIPE = dict(
    vocab_size=320,
    problems_per_task=3000,
    # tiny-s: 3,000 steps, not 1,500: at 1,500 it got two-term sums so seldom right (held-out
    # avg@4 ≈ 0.05) that GRPO found almost no reward to learn from (BENCHMARKS.md, issue 16)
    sft_steps={"tiny-s": 3000, "tiny-m": 1200, "tiny-l": 1000},
    batch_size=64,
    lr=3e-3,
    warmup=50,
    seed=1234,
    max_len=96,
)
SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
Progress = Callable[[int, int], None]  # (warm-start steps done, steps in all)


def data_dir() -> Path:
    root = os.environ.get("TROUPE_DATA_DIR") or Path(__file__).resolve().parent.parent / ".data"
    return Path(root)


def recipe_hash(name: str) -> str:
    import tokenizers
    import transformers

    blob = json.dumps(
        {
            "spec": SPECS[name],
            "recipe": RECIPE,
            "version": RECIPE_VERSION,
            "corpus": corpus_digest(),
            "source": _own_source_digest(),
            "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@functools.cache
def warm_start_corpus() -> tuple[tuple[str, str], ...]:
    """The (prompt, completion) pairs every tiny model is warm-started on (math and code)."""
    from trainer.tasks import load_task
    from trainer.transcripts import corpus

    seed = RECIPE["seed"]
    n = RECIPE["problems_per_task"]
    math_train = load_task("math", "synthetic", seed=0).sample("train", n, seed)
    code_train = load_task("code", "synthetic", seed=0).sample("train", n, seed)
    return tuple((p, c) for p, c in corpus(math_train, code_train, seed))


@functools.cache
def corpus_digest() -> str:
    """sha256 of the warm-start corpus as JSON: the part of the cache key that says what the
    model learns from, whatever code writes it."""
    blob = json.dumps(warm_start_corpus(), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _own_source_digest(path: Path = Path(__file__).resolve()) -> str:
    """sha256 of this module (tokenizer training, encoding and the SFT loop live here)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_dir(name: str) -> Path:
    return data_dir() / "models" / f"{name}-{recipe_hash(name)}"


def ensure_tiny_model(name: str, quiet: bool = False, progress: Progress | None = None) -> Path:
    """Return the directory of the warm-started model, building it on first use (`progress`
    is called after every warm-start step: a run page shows it)."""
    if name not in SPECS:
        raise ValueError(f"unknown tiny model {name!r}; choose one of {', '.join(SPECS)}")
    target = model_dir(name)
    if (target / "done").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds it done
        if not (target / "done").exists():
            staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
            try:
                build_tiny_model(name, staging, quiet=quiet, progress=progress)
                (staging / "done").write_text("ok\n")
                if target.exists():
                    shutil.rmtree(target)
                staging.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return target


def train_tokenizer(texts: list[str], vocab_size: int):
    """A BPE tokenizer trained on the corpus; digits always stay single tokens (arithmetic)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"\d"), behavior="isolated")
    core.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=sorted(set("".join(texts[:2000])) | set("0123456789")),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


def build_tiny_model(
    name: str, out: Path, quiet: bool = False, progress: Progress | None = None
) -> None:
    """Tokenizer + model + warm-start SFT, saved with `save_pretrained` into `out`."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    seed = RECIPE["seed"]
    examples = list(warm_start_corpus())
    tokenizer = train_tokenizer([p + c for p, c in examples], RECIPE["vocab_size"])

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **SPECS[name],
    )
    model = Qwen3ForCausalLM(config)
    rows = _encode(tokenizer, examples, RECIPE["max_len"])
    _sft(model, rows, tokenizer.pad_token_id, RECIPE["sft_steps"][name], name, quiet, progress)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "recipe.json").write_text(
        json.dumps(
            {
                "name": name,
                "hash": recipe_hash(name),
                "recipe": RECIPE,
                "examples": len(rows),
                "parameters": sum(p.numel() for p in model.parameters()),
            },
            indent=2,
        )
    )


def _encode(tokenizer, examples, max_len: int) -> list[tuple[list[int], int]]:
    """(ids, prompt length) per example: BOS + prompt + completion + EOS, truncated."""
    rows = []
    for prompt, completion in examples:
        p = [tokenizer.bos_token_id, *tokenizer.encode(prompt, add_special_tokens=False)]
        c = [*tokenizer.encode(completion, add_special_tokens=False), tokenizer.eos_token_id]
        rows.append(((p + c)[:max_len], len(p)))
    return rows


def _sft(
    model, rows, pad_id: int, steps: int, name: str, quiet: bool, progress: Progress | None = None
) -> None:
    """Next-token loss on completion tokens only; AdamW with warm-up and cosine decay."""
    import math

    rng = random.Random(RECIPE["seed"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=RECIPE["lr"], weight_decay=0.0)
    warmup = RECIPE["warmup"]
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))),
    )
    model.train()
    bar = tqdm(
        range(steps), desc=f"warm-starting {name}", file=sys.stderr, disable=quiet, mininterval=1.0
    )
    for step in bar:
        batch = rng.sample(rows, RECIPE["batch_size"])
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)  # (B, T)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (ids, plen) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, plen : len(ids)] = torch.tensor(ids[plen:])
            mask[i, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        if progress is not None:
            progress(step + 1, steps)
    model.eval()
