"""Benchmark: the exact sampler's decode loop against transformers' `model.generate`.

The same random-weight Qwen3 (tiny-m shape by default), the same left-padded prompts, every
sequence running to its token budget (no end token), temperature 0.7: Troupe's `generate`
(trainer/sampling.py: static cache, in-place decode step, per-row counter-based noise, the
log-prob of each token) against `model.generate(do_sample=True)` — what TRL calls, which gives
neither per-row reproducibility nor log-probs. Reported: generated tokens/s of each and the
ratio, medians of `--repeats` rounds run interleaved in one process; and the decode step's host
reads (syncs on a GPU) per token, counted by a dispatch mode (`.item()`, `bool(tensor)`,
data-dependent shapes), for both, at the GPU's interval between looks at `done`. On a GPU
the same script times both, Troupe's side with its CUDA graphs.

    python bench/decode_step.py --rows 32 --tokens 64 --repeats 5
    python bench/decode_step.py --smoke --json        # seconds: checks that it still runs
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import print_row  # noqa: E402
from trainer import sampling  # noqa: E402
from trainer.tiny import SPECS  # noqa: E402

SYNCING = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "is_nonzero"}


class HostReads(TorchDispatchMode):
    """Counts the operators that make the host wait for the device."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += str(func.overloadpacket).split(".")[-1] in SYNCING
        return func(*args, **(kwargs or {}))


def build(shape: str, device: str):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    spec = {**SPECS[shape], "vocab_size": 2048, "max_position_embeddings": 1024}
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        return Qwen3ForCausalLM._from_config(Qwen3Config(**spec), dtype=dtype).eval()


@functools.cache
def decoding(device: str) -> sampling.Decoding:
    """The picker checked once per device, as the hf engine keeps it."""
    return sampling.Decoding.for_device(device)


def troupe(model, prompts, tokens: int) -> None:
    sampling.generate(
        model,
        prompts,
        seeds=list(range(len(prompts))),
        max_new_tokens=tokens,
        temperature=0.7,
        eos_ids=[-1],
        pad_id=0,
        decoding=decoding(next(model.parameters()).device.type),
    )


@torch.no_grad()
def hf(model, prompts, tokens: int) -> None:
    width = max(len(p) for p in prompts)
    device = next(model.parameters()).device
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=tokens,
        min_new_tokens=tokens,
        do_sample=True,
        temperature=0.7,
        top_k=0,
        pad_token_id=0,
    )


def timed(fn, *args) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    fn(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="tiny-m", choices=sorted(SPECS))
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--smoke", action="store_true", help="tiny-s, 4 rows × 8 tokens, 2 rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.smoke:
        args.shape, args.rows, args.tokens, args.repeats = "tiny-s", 4, 8, 2
    model = build(args.shape, args.device)
    gen = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(1, 2048, (int(n),), generator=gen).tolist()
        for n in torch.randint(8, 40, (args.rows,), generator=gen)
    ]
    autocast = torch.autocast("cuda", torch.bfloat16, enabled=args.device == "cuda")
    with autocast:
        troupe(model, prompts, args.tokens)  # warm-up: kernels, Triton, allocator
        hf(model, prompts, args.tokens)
        times = {"troupe": [], "hf_generate": []}
        for _ in range(args.repeats):  # interleaved, so machine noise hits both alike
            times["troupe"].append(timed(troupe, model, prompts, args.tokens))
            times["hf_generate"].append(timed(hf, model, prompts, args.tokens))
        reads = {}
        # Counted at the GPU's look interval (on the CPU a look is free, so it looks each step).
        interval = sampling.CHECK_EVERY.get(args.device)
        sampling.CHECK_EVERY[args.device] = sampling.CHECK_EVERY["cuda"]
        for name, fn in (("troupe", troupe), ("hf_generate", hf)):
            with HostReads() as counted:
                fn(model, prompts, args.tokens)
            reads[name] = counted.count / args.tokens
        sampling.CHECK_EVERY[args.device] = interval
    generated = args.rows * args.tokens
    tps = {name: generated / statistics.median(t) for name, t in times.items()}
    row = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads, {args.device}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "workload": f"{args.shape}, {args.rows} rows x {args.tokens} tokens",
        "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
        "ratio_troupe_over_hf": round(tps["troupe"] / tps["hf_generate"], 3),
        "host_reads_per_token": {k: round(v, 3) for k, v in reads.items()},
        "smoke": args.smoke,
    }
    print_row(row, args.json)


if __name__ == "__main__":
    main()
