"""The built-in tiny models' weights, shipped in the repository so a fresh clone runs at once.

Building tiny-s from its recipe (`trainer/tiny.py`) takes 8–15 minutes on two cores, and two
builds of one recipe are not bit-identical (the order of float sums across threads differs),
which once decided whether a browser test's cliff appeared. So the built model ships in
`trainer/weights/<name>-<recipe hash>/`: a model whose recipe hash (corpus, recipe, builder
source, library versions) matches a shipped directory is loaded from there, and any other —
an edited corpus, another torch — is built into the data directory as before.

    python -m trainer build-model tiny-s --rebuild --ship   # rebuild, replace the shipped copy

`tests/trainer/test_shipped_weights.py` fails, naming that command, when a change to the
recipe leaves the shipped weights behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from trainer import tiny

SHIPPED = Path(__file__).resolve().parent / "weights"
# What a built model directory holds that loading needs (the data directory's copy also has
# `done`, the builder's marker).
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "recipe.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


def shipped_dir(name: str) -> Path | None:
    """The shipped directory of `name` built by today's recipe, or None."""
    found = SHIPPED / f"{name}-{tiny.recipe_hash(name)}"
    return found if all((found / f).is_file() for f in FILES) else None


def tiny_model_path(
    name: str, quiet: bool = False, progress: tiny.Progress | None = None, rebuild: bool = False
) -> Path:
    """Where tiny model `name` is: shipped, else built (on first use) in the data directory.
    `rebuild` builds it again in the data directory whatever was there or shipped."""
    if not rebuild and (found := shipped_dir(name)) is not None:
        return found
    if rebuild:
        shutil.rmtree(tiny.model_dir(name), ignore_errors=True)
    return tiny.ensure_tiny_model(name, quiet=quiet, progress=progress)


def ship(name: str, built: Path) -> Path:
    """Copy a built model into the repository as `name`'s shipped weights, replacing any
    earlier shipped build of `name`."""
    target = SHIPPED / f"{name}-{tiny.recipe_hash(name)}"
    for old in SHIPPED.glob(f"{name}-*"):
        shutil.rmtree(old)
    target.mkdir(parents=True)
    for file in FILES:
        shutil.copyfile(built / file, target / file)
    return target
