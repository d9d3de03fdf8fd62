"""bench/rollout_engines.py still runs (`--smoke`): both engines, the same tokens.

Marked `vllm`: it needs the vLLM venv (`make vllm-venv`), skipped without it except under
TROUPE_REQUIRE_SERVICES=1 (CI). The numbers themselves live in BENCHMARKS.md.
"""

import pytest

from tests.test_bench_smoke import run_smoke
from tests.trainer.vllm_helpers import require_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


@pytest.mark.timeout(600)
def test_rollout_engines_times_both_engines_on_the_same_prompts():
    require_vllm()
    row = run_smoke("rollout_engines.py", timeout=540)
    assert row["smoke"] is True
    assert row["hf"]["tokens"] == row["vllm"]["tokens"] == 2 * 4 * 8  # every row to budget
    assert row["hf"]["tokens_per_s"] > 0 and row["vllm"]["tokens_per_s"] > 0
    assert row["vllm"]["startup_s"] > 0 and 0 < row["vllm"]["sync_share"] < 1
    assert row["ratio_vllm_over_hf"] > 0
