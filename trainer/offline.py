"""Whether this node may reach the Hugging Face Hub: the one reading of `TROUPE_OFFLINE` and
`HF_HUB_OFFLINE`, shared by the worker's model download (`trainer/models.py`) and the web
server's check of a model id at submit time (`webapp/runs/queueing.py`). Torch-free,
so the web process can import it."""

from __future__ import annotations

import os


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def offline_reason() -> str | None:
    """Why this node may not download a model (None: it may)."""
    if _truthy("TROUPE_OFFLINE"):
        return "TROUPE_OFFLINE=1 forbids downloads on this node"
    if _truthy("HF_HUB_OFFLINE"):
        return "HF_HUB_OFFLINE=1 is set on this node"
    return None
