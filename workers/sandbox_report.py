"""At worker start, log which isolation layers the code sandbox holds on this machine.

A code task refuses to score below the configured minimum (`sandbox.
require_isolation`); this line in the worker's log says up front whether it will, and why.
"""

from __future__ import annotations

import logging

from celery.signals import worker_ready

logger = logging.getLogger("troupe.sandbox")


@worker_ready.connect
def log_sandbox_layers(**_kwargs) -> None:
    import sandbox  # only in the worker: the web process never needs it

    try:
        layers = sandbox.available_layers()
        required = sandbox.required_layers()
    except Exception as exc:  # a broken sandbox must not stop the worker's other tasks
        logger.error("code sandbox: unusable here (%s); code tasks will refuse to score", exc)
        return
    missing = [name for name in required if name not in layers]
    summary = "code sandbox isolation layers: %s (required: %s)"
    args = (", ".join(layers) or "none", ", ".join(required) or "none")
    if not missing:
        logger.info(summary, *args)
    elif sandbox.weak_allowed():
        logger.warning(
            summary + "; missing %s, allowed by %s",
            *args,
            ", ".join(missing),
            sandbox.ALLOW_WEAK_ENV,
        )
    else:
        logger.error(
            summary + "; missing %s: code tasks will refuse to score", *args, ", ".join(missing)
        )
