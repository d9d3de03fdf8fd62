"""Benchmark plumbing: concurrent clients timed together.

`timed_clients(shares, loop)` runs `loop(share)` for each share of the work in a thread of its
own, starts them together and returns the wall seconds until the last one ended; the first
exception any thread raised is raised after all have ended, so a failed request never passes
for a fast one. `bench/tracking_vs_mlflow.py` and `bench/mlflow_endpoint.py` time their
ingestion with it (each thread holds its own HTTP session or MLflow client).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

Share = TypeVar("Share")


def timed_clients(shares: Sequence[Share], loop: Callable[[Share], None]) -> float:
    """Seconds from starting `loop(share)` in one thread per share until every one ended."""
    errors: list[BaseException] = []

    def run(share: Share) -> None:
        try:
            loop(share)
        except BaseException as exc:  # noqa: BLE001 - raised below, after the join
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(share,)) for share in shares]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    return seconds
