"""The tiny-s weights shipped in trainer/weights/ are the ones today's recipe builds, and a
fresh data directory loads them without a warm start."""

from __future__ import annotations

import pytest

from trainer import tiny, tiny_weights
from trainer.models import load_model

REBUILD = "python -m trainer build-model tiny-s --ship"


def test_the_shipped_tiny_s_is_built_by_todays_recipe():
    shipped = sorted(p.name for p in tiny_weights.SHIPPED.glob("tiny-s-*"))
    expected = f"tiny-s-{tiny.recipe_hash('tiny-s')}"
    assert shipped == [expected], (
        f"trainer/weights/ holds {shipped}, but today's recipe, corpus and libraries make "
        f"{expected}: rebuild and ship it with `{REBUILD}` (8-15 minutes on two cores) and "
        "commit trainer/weights/."
    )


def test_a_fresh_data_directory_loads_the_shipped_tiny_s_without_a_warm_start(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("TROUPE_DATA_DIR", str(tmp_path))
    steps = []
    loaded = load_model("tiny-s", progress=lambda done, total: steps.append(done))
    assert steps == []  # no warm-start step was taken
    assert loaded.path == str(tiny_weights.shipped_dir("tiny-s"))
    assert not (tmp_path / "models").exists()
    assert sum(p.numel() for p in loaded.model.parameters()) == pytest.approx(437_280)


def test_a_recipe_without_shipped_weights_is_built_in_the_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TROUPE_DATA_DIR", str(tmp_path))
    monkeypatch.setitem(tiny.RECIPE, "sft_steps", {**tiny.RECIPE["sft_steps"], "tiny-s": 2})
    monkeypatch.setitem(tiny.RECIPE, "problems_per_task", 50)
    tiny.warm_start_corpus.cache_clear()
    tiny.corpus_digest.cache_clear()
    try:
        assert tiny_weights.shipped_dir("tiny-s") is None
        path = tiny_weights.tiny_model_path("tiny-s", quiet=True)
        assert path == tiny.model_dir("tiny-s") and (path / "done").exists()
    finally:
        tiny.warm_start_corpus.cache_clear()
        tiny.corpus_digest.cache_clear()
