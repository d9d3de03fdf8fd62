"""trainer/memory.py keeps the tiny models' shapes for the web process (which cannot import
trainer/tiny.py: it imports torch); they must be the shapes tiny.py builds."""

from trainer import tiny
from trainer.memory import TINY_SHAPES


def test_the_memory_estimate_knows_the_tiny_models_as_tiny_py_builds_them():
    assert set(TINY_SHAPES) == set(tiny.SPECS)
    for name, spec in tiny.SPECS.items():
        assert TINY_SHAPES[name] == {
            **spec,
            "vocab_size": tiny.RECIPE["vocab_size"],
            "tie_word_embeddings": True,
        }
