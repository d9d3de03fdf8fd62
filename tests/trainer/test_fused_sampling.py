"""The fused Triton token picker against the plain one, and how the sampler is told which to use.

The kernel runs under Triton's interpreter (`TRITON_INTERPRET=1`, in a process of its own:
tests/trainer/interpreted_picker.py): the same program a GPU compiles, run with numpy on the CPU.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT
from tests.trainer.test_sampler import CALL, PROMPTS, SEEDS
from tests.trainer.test_sampler import model as model  # noqa: F401 (the module's fixture)
from trainer import fused_sampling
from trainer.engines.hf import HFEngine
from trainer.sampling import Decoding, generate, pick_tokens

INTERPRETED = "tests/trainer/interpreted_picker.py"


def test_the_kernel_agrees_with_the_plain_picker_under_tritons_interpreter():
    """tests/trainer/interpreted_picker.py in a process of its own: TRITON_INTERPRET must be
    set before anything imports Triton (its language functions are decorated then), and in
    this process a library may already have imported it."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", INTERPRETED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "12 passed" in done.stdout, done.stdout[-2000:]


def test_the_checked_picker_keeps_the_plain_code_when_the_kernel_disagrees(monkeypatch):
    def off_by_one(reference):
        def pick(logits, seeds, position, temperature):
            choice, logp = reference(logits, seeds, position, temperature)
            return (choice + 1) % logits.shape[-1], logp

        return pick

    monkeypatch.setattr(fused_sampling, "fused_picker", off_by_one)
    pick, status = fused_sampling.checked_picker(pick_tokens, "cpu")
    assert pick is pick_tokens
    assert status == "off (tokens differ at vocab 5003, temperature 0.7)"


def test_the_checked_picker_keeps_the_plain_code_without_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "trainer.pick_kernel", None)  # the import fails
    pick, status = fused_sampling.checked_picker(pick_tokens, "cpu")
    assert pick is pick_tokens and status.startswith("off (ModuleNotFoundError")


def test_the_caller_says_which_picker_samples(model):  # noqa: F811
    """`generate` uses the picker it is given, nothing a process remembers; the CPU's default is
    the plain picker."""
    calls = []

    def counted(logits, seeds, position, temperature):
        calls.append(1)
        return pick_tokens(logits, seeds, position, temperature)

    plain = generate(model, PROMPTS, seeds=SEEDS, max_new_tokens=6, **CALL)
    spied = generate(
        model, PROMPTS, seeds=SEEDS, max_new_tokens=6, decoding=Decoding(pick=counted), **CALL
    )
    assert calls and [s.completion_ids for s in spied] == [s.completion_ids for s in plain]
    assert Decoding.for_device("cpu") == Decoding()


def test_the_hf_engine_keeps_one_decoding(model):  # noqa: F811
    class One:  # the one policy the engine generates with
        @staticmethod
        def use(name):
            import contextlib

            return contextlib.nullcontext(model)

    engine = HFEngine(One())
    args = dict(seeds=SEEDS[:2], max_new_tokens=[3, 3], temperature=0.7, eos_ids=[], pad_id=0)
    engine.generate("p", PROMPTS[:2], **args)
    first = engine.decoding
    engine.generate("p", PROMPTS[:2], **args)
    assert first is engine.decoding and first.picker == "plain"
