"""The library versions the trainer needs, checked before a model is loaded.

The exact sampler (trainer/sampling.py) drives transformers' model forward with its newer
cache API (`cache=`, `StaticCache` that tracks its own length, `outputs.cache`): on an older
transformers it failed deep inside the first rollout ("'CausalLMOutputWithPast' object has no
attribute 'cache'" on 5.17). A GPU image that ships its own libraries is the usual way to get
there, so the check names the version to install instead.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# The oldest versions known to work: requirements.txt pins these.
MINIMUM = {"transformers": "5.24.0"}


def _tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdecimal())
        if not digits:
            break
        parts.append(int(digits))
        if digits != piece:  # "0rc1": a pre-release of this version, compare its number only
            break
    return tuple(parts)


def problems() -> list[str]:
    """One line per library that is missing or older than the trainer needs (none: fine)."""
    found = []
    for name, needed in MINIMUM.items():
        try:
            have = version(name)
        except PackageNotFoundError:
            found.append(f"{name} is not installed; Troupe's trainer needs {name}>={needed}")
            continue
        if _tuple(have) < _tuple(needed):
            found.append(
                f"{name} {have} is too old for Troupe's trainer, which needs {name}>={needed} "
                f"(pip install {name}=={needed})"
            )
    return found
