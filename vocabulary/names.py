"""The names that are a contract (docs/design.md §5): metric keys, the metric names under a
role, agent or policy, the matrix's axes and the sharing and reward modes, and which keys the
live radar reads, each written here once.

Code that writes or reads a metric names it from here: a whole key by its constant
(`LOSS_KEY`), a per-role, per-agent or per-policy key with a builder and a metric constant
(`role_key("generator", GRAD_NORM)`), never with a literal or an f-string of its own, and an
axis tuple by its name, never by spelling it out. `tests/test_vocabulary.py` reads every key and
metric name from this module and fails when product code spells one elsewhere. The trainer logs
these names, the analysis reads them and the web app stores, serves and draws them, so this
package sits below all three and imports nothing at all: every process may import it.
"""

from __future__ import annotations

# --- the matrix ---------------------------------------------------------------------------------

# A matrix cell: the runs of one cell differ only in their seed (docs/design.md §6, "across
# seeds"). The experiment's matrix adds the seed axis; `trainer.config` validates against it.
CELL_AXES = ("workflow", "task", "model", "sharing")
MATRIX_AXES = (*CELL_AXES, "seed")

# The sharing modes (the `sharing` axis's values) and the reward modes: the config's values that
# the trainer routes by and the analysis and pages compare against. `per_role` names two things,
# one policy per role and one reward per role, so each has its own constant.
SHARED = "shared"  # one policy for every role; also that policy's name
PER_ROLE = "per_role"  # one policy per role
PER_AGENT = "per_agent"  # one policy per agent
SHARING_MODES = (SHARED, PER_ROLE, PER_AGENT)
REWARD_BROADCAST = "broadcast"  # every turn gets the episode's final reward
REWARD_PER_ROLE = "per_role"  # a scored turn gets its own reward
REWARD_MODES = (REWARD_BROADCAST, REWARD_PER_ROLE)

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

# The update's and the step's own figures (trainer/update.py, trainer/train.py).
LOSS_KEY = "train/loss"
KL_KEY = "train/kl"
ENTROPY_KEY = "train/entropy"
CLIP_FRAC_KEY = "train/clip_frac"
RESP_LEN_KEY = "train/resp_len"  # mean completion length in tokens
GROUPS_KEY = "train/groups"  # GRPO groups in the step
MALFORMED_KEY = "train/malformed_frac"
STEP_SECONDS_KEY = "sys/step_seconds"
TOKENS_PER_SECOND_KEY = "sys/tokens_per_second"
PEAK_MEMORY_KEY = "sys/peak_memory_mb"
ROLLOUT_SECONDS_KEY = "sys/rollout_seconds"
UPDATE_SECONDS_KEY = "sys/update_seconds"
EVAL_SECONDS_KEY = "sys/eval_seconds"
GRAD_SNAPSHOT_KEY = "sys/grad_snapshot_mb"  # the drill-down's gradient snapshots at their peak
DB_SECONDS_KEY = "sys/db_seconds"  # runs a worker trains: time in the database reporter
PARAM_DTYPE_KEY = "sys/param_dtype"  # bits per parameter as stored, logged once
COMPUTE_DTYPE_KEY = "sys/compute_dtype"  # bits of the autocast compute type, logged once
TOKEN_BUDGET_KEY = "sys/token_budget"  # tokens a packed pass, as resolved; logged once

# Behaviour metrics (trainer/behaviour.py): what the agents did in a step's episodes, each
# declared here once with the name the pages give it. BEHAVIOUR_KEYS are those the experiment
# page's matrix can be coloured by, one value a step: every one a share on a fixed 0–1 scale
# but the BEHAVIOUR_COUNTS, mean counts whose scale runs to the largest cell.
EVALUATOR_ACCEPT_CORRECT_KEY = "behav/evaluator_accept_correct"
EVALUATOR_ACCEPT_WRONG_KEY = "behav/evaluator_accept_wrong"  # the evaluator waves wrong through
VOTER_AGREEMENT_KEY = "behav/voter_agreement"  # all voters alike: diversity collapse at 1
AGGREGATOR_FOLLOWS_KEY = "behav/aggregator_follows_majority"
ORCHESTRATOR_SUBTASKS_KEY = "behav/orchestrator_subtasks"
BEHAVIOURS = {
    EVALUATOR_ACCEPT_CORRECT_KEY: "evaluator accepts correct",
    EVALUATOR_ACCEPT_WRONG_KEY: "evaluator accepts wrong",
    VOTER_AGREEMENT_KEY: "voter agreement",
    AGGREGATOR_FOLLOWS_KEY: "aggregator follows majority",
    ORCHESTRATOR_SUBTASKS_KEY: "orchestrator subtasks",
}
BEHAVIOUR_KEYS = tuple(BEHAVIOURS)
BEHAVIOUR_COUNTS = (ORCHESTRATOR_SUBTASKS_KEY,)

# --- metric names under a role, an agent or a policy -----------------------------------------

GRAD_NORM = "grad_norm"
GRAD_SHARE = "grad_share"  # ‖g_role‖ / Σ ‖g_r‖ over the roles on the same policy
ENTROPY = "entropy"
KL = "kl"
TOKENS = "tokens"
RESP_LEN = "resp_len"
OPT_STEPS = "opt_steps"
PG_LOSS = "pg_loss"
CLIP_FRAC = "clip_frac"
COHERENCE_SCALE = "coherence_scale"  # with the coherence regulariser on
COHERENCE_COS = "coherence_cos"
TRUNC_FRAC = "trunc_frac"  # a behaviour metric: the share of the role's turns at their budget
# Code tasks: the share of the role's re-checked passing answers that the second opinion
# failed (trainer/rollout.py), in steps where it re-checked some.
VERDICT_DISAGREEMENT_RATE = "verdict_disagreement_rate"
LR = "lr"
SKIPPED = "skipped"  # a non-finite gradient skipped the step
ROLE_METRICS = (
    GRAD_NORM,
    GRAD_SHARE,
    ENTROPY,
    KL,
    TOKENS,
    RESP_LEN,
    OPT_STEPS,
    PG_LOSS,
    CLIP_FRAC,
    COHERENCE_SCALE,
    COHERENCE_COS,
    TRUNC_FRAC,
    VERDICT_DISAGREEMENT_RATE,
)
AGENT_METRICS = (GRAD_NORM,)
POLICY_METRICS = (GRAD_NORM, LR, SKIPPED)

ROLE_PREFIX = "role/"
AGENT_PREFIX = "agent/"
POLICY_PREFIX = "policy/"
GRAD_COS_PREFIX = "grad_cos/"


def role_key(role: str, metric: str) -> str:
    """`role/<role>/<metric>`: a role's own figure, one of ROLE_METRICS."""
    return f"{ROLE_PREFIX}{role}/{metric}"


def agent_key(agent: str, metric: str) -> str:
    """`agent/<agent>/<metric>`: one of several parallel same-role agents (generator0)."""
    return f"{AGENT_PREFIX}{agent}/{metric}"


def policy_key(policy: str, metric: str) -> str:
    """`policy/<policy>/<metric>`: one of POLICY_METRICS."""
    return f"{POLICY_PREFIX}{policy}/{metric}"


def role_accuracy_key(role: str) -> str:
    """`eval/accuracy/<role>`, where a role's own output can be scored."""
    return f"{ACCURACY_KEY}/{role}"


def grad_cos_key(a: str, b: str) -> str:
    """`grad_cos/<a>|<b>`: the cosine between two roles' or agents' gradients on one policy,
    the pair in sorted order, so every writer names a pair with one key whatever order it
    meets the two in (a voting run's `grad_cos/aggregator|generator`)."""
    first, second = sorted((a, b))
    return f"{GRAD_COS_PREFIX}{first}|{second}"


def role_of(key: str) -> str | None:
    """The role a `role/<role>/<metric>` key names, else None."""
    if not key.startswith(ROLE_PREFIX) or key.count("/") < 2:
        return None
    return key.split("/")[1]


def roles_in(keys) -> list[str]:
    """The sorted roles named by any `role/<role>/<metric>` key among `keys`."""
    return sorted({role for key in keys if (role := role_of(key)) is not None})


# --- what the live radar raises -----------------------------------------------------------------

# Its alert kinds, worst first: the order a run's events are ranked in on every page (a confirmed
# cliff outranks everything; a NaN loss or reward means the run is broken, not just worse; the
# behaviour rules come last).
ALERT_KINDS = (
    "cliff",
    "degradation",
    "non_finite_loss",
    "non_finite_reward",
    "reward_hacking_suspected",  # an independent re-check failed a passing answer
    "amplification",
    "capture",
    "entropy_collapse",
    "zero_std_groups",
    "evaluator_accepts_wrong",  # the behaviour rules (analysis.radar.behavioural_events)
    "voter_collapse",
)

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
RADAR_ROLE_METRICS = (GRAD_NORM, GRAD_SHARE, ENTROPY)


def radar_reads(key: str) -> bool:
    """Whether the live radar reads `key`."""
    return key in RADAR_KEYS or (
        key.startswith(ROLE_PREFIX) and key.endswith(tuple(f"/{m}" for m in RADAR_ROLE_METRICS))
    )
