"""The vLLM side of the `vllm` rollout engine: run by the vLLM venv's Python, not Troupe's.

vLLM pins its own torch and transformers, so it cannot be imported by the trainer; this
script (standard library + vLLM only, never `trainer`) holds one `vllm.LLM` and answers
requests from `trainer/engines/vllm_engine.py` as JSON lines: token ids in, token ids and
per-token log-probs out. vLLM's OpenAI server would do for generation, but reloading
full weights in place needs `LLM.collective_rpc` in the engine's own process, and the CPU
build's tied output layer needs re-dispatching after a reload (below), so the engine is
driven through vLLM's Python API instead.

    python vllm_driver.py '<json settings>'   # then one JSON request per line on stdin

Requests (each answered by one line, {"ok": true, ...} or {"ok": false, "error": "..."}):
    {"op": "generate", "temperature": t, "stop": [ids], "requests":
        [{"prompt": [ids], "seed": s, "max_tokens": n, "lora": name | null}, ...]}
        -> {"results": [{"ids": [...], "logprobs": [...], "finish": "stop" | "length"}]}
    {"op": "load_lora", "name": n, "path": p}   (re)load adapter n from p, in place
    {"op": "reload_weights", "path": p}         full weights from a save_pretrained dir
    {"op": "shutdown"}

Replies go to the pipe that was stdout when the script started; vLLM's own logging and
prints are sent to stderr (the engine's log file), so they can never corrupt a reply.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _reply_channel():
    """Keep the original stdout for replies and point fd 1 at stderr for everything else."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    return os.fdopen(reply_fd, "w", buffering=1)


def _redispatch_embeddings(worker) -> int:
    """Re-run the CPU GEMM dispatch of every embedding-like layer after a weight reload.

    On the CPU build a vocabulary embedding keeps a repacked copy of its weight for the
    logits GEMM; with tied embeddings the output layer IS the input embedding, whose reload
    writes the weight but leaves that copy stale, so the model would sample from the old
    output layer. Returns how many layers were refreshed.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return 0
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    model = worker.model_runner.get_model()
    count = 0
    for module in model.modules():
        if isinstance(module, VocabParallelEmbedding) and not module.weight.is_meta:
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
            count += 1
    return count


def _llm_kwargs(settings: dict) -> dict:
    """`vllm.LLM`'s arguments for the engine's settings (see `vllm_engine.py`)."""
    kwargs = dict(
        model=settings["model"],
        dtype=settings.get("dtype", "float32"),
        seed=settings.get("seed", 0),
        # CUDA graphs on a GPU; the CPU build runs eager (no compile at start-up)
        enforce_eager=settings.get("enforce_eager", False),
        skip_tokenizer_init=True,  # token ids in and out; Troupe's tokenizer stays the truth
        # log-probs of the distribution actually sampled from (after temperature), which is
        # what the trainer's own log-probs are and what the IS ratio compares against
        logprobs_mode="processed_logprobs",
        max_model_len=settings["max_model_len"],
        # A GRPO group shares its prompt: cached prefixes are computed once. The cache is
        # emptied after every weight sync, or it would serve the old weights' keys/values.
        enable_prefix_caching=True,
    )
    if settings.get("whole_prefills"):
        # The CPU build cannot rewind a seeded request's generator after a partial (chunked)
        # prefill ("CPU Generator does not use offset"): prefill each prompt whole instead.
        kwargs.update(
            enable_chunked_prefill=False,
            max_num_batched_tokens=max(settings["max_model_len"], 8192),
        )
    if settings.get("gpu_memory_utilization"):
        kwargs["gpu_memory_utilization"] = settings["gpu_memory_utilization"]
    if settings.get("lora"):
        kwargs.update(
            enable_lora=True,
            max_loras=settings["max_loras"],
            max_lora_rank=settings["max_lora_rank"],
            max_cpu_loras=settings["max_loras"],
        )
    return kwargs


class _Driver:
    """One `vllm.LLM` and the adapters loaded into it; a method per request's op."""

    def __init__(self, llm) -> None:
        self.llm = llm
        self.lora_ids: dict[str, int] = {}
        self.lora_paths: dict[str, str] = {}

    def lora_request(self, name: str, load_inplace: bool = False):
        from vllm.lora.request import LoRARequest

        path = self.lora_paths[name]
        return LoRARequest(name, self.lora_ids[name], path, load_inplace=load_inplace)

    def load_lora(self, request: dict) -> dict:
        name = request["name"]
        self.lora_ids.setdefault(name, len(self.lora_ids) + 1)
        self.lora_paths[name] = request["path"]
        # In place: re-sending an adapter id with a new path would keep the old
        # weights (the id is already loaded); load_inplace replaces them.
        self.llm.llm_engine.add_lora(self.lora_request(name, load_inplace=True))
        self.llm.reset_prefix_cache()
        return {"ok": True}

    def reload_weights(self, request: dict) -> dict:
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": request["path"]})
        refreshed = self.llm.collective_rpc(_redispatch_embeddings)
        self.llm.reset_prefix_cache()
        return {"ok": True, "refreshed": refreshed}

    def generate(self, request: dict) -> dict:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        rows = request["requests"]
        prompts = [TokensPrompt(prompt_token_ids=r["prompt"]) for r in rows]
        params = [
            SamplingParams(
                temperature=request["temperature"],
                seed=r["seed"],
                max_tokens=r["max_tokens"],
                stop_token_ids=request["stop"],
                ignore_eos=True,  # stop on exactly Troupe's end ids, no others
                logprobs=0,  # the sampled token's own log-prob
                detokenize=False,
            )
            for r in rows
        ]
        loras = [self.lora_request(r["lora"]) if r.get("lora") else None for r in rows]
        outputs = self.llm.generate(
            prompts, params, lora_request=loras if any(loras) else None, use_tqdm=False
        )
        results = []
        for out in outputs:
            done = out.outputs[0]
            ids = list(done.token_ids)
            logps = [float(step[tok].logprob) for tok, step in zip(ids, done.logprobs)]
            results.append({"ids": ids, "logprobs": logps, "finish": done.finish_reason})
        return {"ok": True, "results": results}


def main() -> None:
    settings = json.loads(sys.argv[1])
    replies = _reply_channel()

    def send(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    from vllm import LLM

    try:
        llm = LLM(**_llm_kwargs(settings))
    except Exception as exc:  # noqa: BLE001 - any start-up failure is reported, then we exit
        traceback.print_exc()
        send({"ok": False, "error": f"vLLM could not start: {type(exc).__name__}: {exc}"})
        return
    send({"ok": True, "ready": True})
    _serve(_Driver(llm), send)


def _serve(driver: _Driver, send) -> None:
    """Answer each request line on stdin until `shutdown` (or the end of stdin)."""
    ops = {
        "load_lora": driver.load_lora,
        "reload_weights": driver.reload_weights,
        "generate": driver.generate,
    }
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        op = request.get("op")
        try:
            if op == "shutdown":
                send({"ok": True})
                break
            if op in ops:
                send(ops[op](request))
            else:
                send({"ok": False, "error": f"unknown op {op!r}"})
        except Exception as exc:  # noqa: BLE001 - report it; the trainer fails the run
            traceback.print_exc()
            send({"ok": False, "error": f"{op}: {type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main()
