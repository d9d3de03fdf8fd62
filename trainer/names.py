"""The names that are a contract (docs/design.md §5): metric keys, the matrix's axes and which
keys the live radar reads, each written here once.

Code builds a key with the functions below (`role_key("generator", "grad_norm")`), never with
an f-string of its own, and names an axis tuple from here, never by spelling it out:
`tests/test_vocabulary.py` fails when `"eval/accuracy"` or the axes tuple is written anywhere
else. The trainer logs these names, the analysis reads them and the web app stores, serves and
draws them, so this module imports nothing at all: every process may import it.
"""

from __future__ import annotations

# --- the matrix ---------------------------------------------------------------------------------

# A matrix cell: the runs of one cell differ only in their seed (docs/design.md §6, "across
# seeds"). The experiment's matrix adds the seed axis; `trainer.config` validates against it.
CELL_AXES = ("workflow", "task", "model", "sharing")
MATRIX_AXES = (*CELL_AXES, "seed")

# --- metric keys ----------------------------------------------------------------------------------

ACCURACY_KEY = "eval/accuracy"  # held-out mean reward; step 0 is the base model
ACCURACY_SE_KEY = "eval/accuracy_se"  # its standard error, problems as the unit
REWARD_KEY = "train/reward"
REWARD_STD_KEY = "train/reward_std"
ZERO_STD_KEY = "train/frac_zero_std"  # share of GRPO groups whose rewards are all equal
# rollout_engine vllm: |logπ_trainer − logπ_engine| per sampled token, mean and max of a step
ROLLOUT_LOGP_GAP_KEY = "train/rollout_logp_gap"
ROLLOUT_LOGP_GAP_MAX_KEY = "train/rollout_logp_gap_max"
ENGINE_STARTUP_KEY = "sys/engine_startup_seconds"  # the rollout engine's start-up (vllm)
ENGINE_SYNC_KEY = "sys/engine_sync_seconds"  # writing + reloading the updated weights (vllm)
# Passing answers of a step that an independent re-check failed (trainer/rollout.py's second
# opinion): above 0, the verifier may have a hole the policy found — reward hacking suspected.
VERDICT_DISAGREEMENTS_KEY = "sandbox/verdict_disagreements"
BEST_STEP_KEY = "ckpt/best_step"
BEST_ACCURACY_KEY = "ckpt/best_accuracy"

# Behaviour metrics (trainer/behaviour.py): what the agents did in a step's episodes. The two
# the radar reads have names of their own; BEHAVIOUR_KEYS are those the experiment page's
# matrix can be coloured by (every one a share or a mean count, one value a step).
EVALUATOR_ACCEPT_CORRECT_KEY = "behav/evaluator_accept_correct"
EVALUATOR_ACCEPT_WRONG_KEY = "behav/evaluator_accept_wrong"  # the evaluator waves wrong through
VOTER_AGREEMENT_KEY = "behav/voter_agreement"  # all voters alike: diversity collapse at 1
AGGREGATOR_FOLLOWS_KEY = "behav/aggregator_follows_majority"
ORCHESTRATOR_SUBTASKS_KEY = "behav/orchestrator_subtasks"
BEHAVIOUR_KEYS = (
    EVALUATOR_ACCEPT_CORRECT_KEY,
    EVALUATOR_ACCEPT_WRONG_KEY,
    VOTER_AGREEMENT_KEY,
    AGGREGATOR_FOLLOWS_KEY,
    ORCHESTRATOR_SUBTASKS_KEY,
)

ROLE_PREFIX = "role/"
AGENT_PREFIX = "agent/"
POLICY_PREFIX = "policy/"
GRAD_COS_PREFIX = "grad_cos/"


def role_key(role: str, metric: str) -> str:
    """`role/<role>/<metric>`: a role's own figure (grad_norm, grad_share, entropy, kl, …)."""
    return f"{ROLE_PREFIX}{role}/{metric}"


def agent_key(agent: str, metric: str) -> str:
    """`agent/<agent>/<metric>`: one of several parallel same-role agents (generator0)."""
    return f"{AGENT_PREFIX}{agent}/{metric}"


def policy_key(policy: str, metric: str) -> str:
    """`policy/<policy>/<metric>`: grad_norm, lr, skipped."""
    return f"{POLICY_PREFIX}{policy}/{metric}"


def role_accuracy_key(role: str) -> str:
    """`eval/accuracy/<role>`, where a role's own output can be scored."""
    return f"{ACCURACY_KEY}/{role}"


def grad_cos_key(a: str, b: str) -> str:
    """`grad_cos/<a>|<b>`: the cosine between two roles' or agents' gradients on one policy."""
    return f"{GRAD_COS_PREFIX}{a}|{b}"


def role_of(key: str) -> str | None:
    """The role a `role/<role>/<metric>` key names, else None."""
    if not key.startswith(ROLE_PREFIX) or key.count("/") < 2:
        return None
    return key.split("/")[1]


def roles_in(keys) -> list[str]:
    """The sorted roles named by any `role/<role>/<metric>` key among `keys`."""
    return sorted({role for key in keys if (role := role_of(key)) is not None})


# --- what the live radar reads -----------------------------------------------------------------

# The radar (analysis/radar.py) reads these whole keys and each role's RADAR_ROLE_METRICS; a
# batch of points touching none of them cannot change its verdicts, so the write path skips it.
RADAR_KEYS = (
    ACCURACY_KEY,
    ACCURACY_SE_KEY,
    ZERO_STD_KEY,
    EVALUATOR_ACCEPT_WRONG_KEY,
    VOTER_AGREEMENT_KEY,
    VERDICT_DISAGREEMENTS_KEY,
)
RADAR_ROLE_METRICS = ("grad_norm", "grad_share", "entropy")


def radar_reads(key: str) -> bool:
    """Whether the live radar reads `key`."""
    return key in RADAR_KEYS or (
        key.startswith(ROLE_PREFIX) and key.endswith(tuple(f"/{m}" for m in RADAR_ROLE_METRICS))
    )
