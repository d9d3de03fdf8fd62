"""MLflow's experiments and runs over Troupe's models: finding, creating, logging, updating.

- Experiment ids are Troupe experiment ids, except "0": each user's own "Default" experiment
  (made on first use). Names are unique per owner, so two people whose code both says
  `mlflow.set_experiment("grpo-math")` get one experiment each.
- Run ids are 32 hex characters; any other Troupe run is reachable by its number ("12"), so an
  MLflow client can read every run. Writing needs an external run of an experiment the caller
  may change (its owner or staff, `webapp/runs/access.py`).
- `log_batch` validates the whole request first and stores nothing when any of it is wrong.
  A param value over 6,000 characters or a tag value over 8,000 is not wrong: it is cut
  there, as MLflow's server cuts it (`MLFLOW_TRUNCATE_LONG_VALUES`), and the rest of the
  batch stored; the run's `cut` records what was cut, the run's log and the server's log
  say so, and the run page marks the value.
  Every point is kept, as MLflow keeps it: at each (key, step) the latest stands in the metric
  table (`record_points`) and the others are kept as earlier points (`repeats.py`); an exact
  repeat is dropped. `webapp.tracking.keymap` adds each recognised key's Troupe alias, except
  onto a Troupe key the client logs itself (`TrackedRun.shadowed`).
  Params become the run's config (MLflow's rule: a param never changes value); tags and params
  named `workflow`, `task`, `model`, `sharing`, `seed` fill the run's matrix cell, and
  `troupe.accuracy_key` names the key to show as `eval/accuracy`.
The offline importer (`webapp/tracking/importers.py`) logs through `log_batch` too.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from trainer.config import INT_MAX
from vocabulary.names import MATRIX_AXES
from webapp.alerts.points import record_points
from webapp.alerts.radar import settle_run
from webapp.experiments.models import Experiment, Run, RunLog, TrackedExperiment, TrackedRun
from webapp.ids import whole_number
from webapp.metrics import (
    delete_series,
    lookups,
    stored_keys,
    write_point_times,
    write_signs,
    write_step_times,
)
from webapp.metrics.lookups import Rider
from webapp.runs.access import can_manage
from webapp.runs.cells import run_columns
from webapp.runs.run_files import delete_runs
from webapp.tracking import artifacts, keymap
from webapp.tracking.protocol import DENIED, EXISTS, INVALID, MISSING, MlflowError, entity_name
from webapp.tracking.repeats import standing_points

log = logging.getLogger(__name__)

# MLflow's limits on one log-batch request, and on the values of params and tags (a longer
# run's param or tag value is cut there; a longer experiment tag value is refused).
MAX_METRICS, MAX_PARAMS, MAX_TAGS, MAX_ENTITIES = 1000, 100, 100, 1000
PARAM_VALUE_LIMIT, TAG_VALUE_LIMIT, EXPERIMENT_TAG_LIMIT = 6000, 8000, 20000
METRIC_KEY_LIMIT = keymap.MAX_KEY_LENGTH  # Troupe's column (MLflow allows 250)

ACCURACY_TAG = "troupe.accuracy_key"
RUN_NAME_TAG = "mlflow.runName"
SYSTEM_PREFIX = "system/"  # MLflow's system metrics (`mlflow.enable_system_metrics_logging`)
STEPS_PARAMS = ("steps", "max_steps", "trainer/total_training_steps", "total_training_steps")

TO_TROUPE = {
    "RUNNING": Run.RUNNING,
    "SCHEDULED": Run.QUEUED,
    "FINISHED": Run.SUCCEEDED,
    "FAILED": Run.FAILED,
    "KILLED": Run.CANCELLED,
}
TO_MLFLOW = {troupe: mlflow for mlflow, troupe in TO_TROUPE.items()}


class Point(NamedTuple):  # a tuple: a batch makes a thousand of them
    key: str
    value: float
    timestamp: int  # ms since the epoch
    step: int


def now_ms() -> int:
    return int(time.time() * 1000)


def to_datetime(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


# --- experiments ---------------------------------------------------------------------------------


def default_experiment(user, create: bool) -> Experiment | None:
    """The user's "Default" experiment (MLflow's "0"), made when `create` and missing."""
    tracked = TrackedExperiment.objects.filter(default_of=user).select_related("experiment").first()
    if tracked is not None or not create:
        return tracked and tracked.experiment
    try:
        with transaction.atomic():
            experiment = Experiment.objects.create(
                owner=user, name="Default", description="MLflow's default experiment."
            )
            TrackedExperiment.objects.create(
                experiment=experiment, default_of=user, owner=user, name="Default"
            )
    except IntegrityError:  # a concurrent first request made it
        return default_experiment(user, create=False)
    return experiment


def parse_experiment_id(raw: str) -> int:
    number = whole_number(raw) if isinstance(raw, str | int) else None
    if number is None or number > INT_MAX:
        raise MlflowError(INVALID, f"Experiment id must be a number such as '0', not {raw!r}.")
    return number


def find_experiment(
    user, raw_id: str, *, manage: bool = False, active: bool = True
) -> Experiment | None:
    """The experiment with MLflow id `raw_id`: None for an unmade "0" (unless `manage`, which
    makes it). MlflowError when there is none, or when `manage` and the user may not, or it
    is deleted (unless not `active`: restoring it)."""
    number = parse_experiment_id(raw_id)
    if number == 0:
        return default_experiment(user, create=manage)
    experiment = Experiment.objects.select_related("owner").filter(id=number).first()
    if experiment is None:
        raise MlflowError(MISSING, f"No experiment with id '{raw_id}' exists.")
    if manage and active and experiment_deleted(experiment):
        raise MlflowError(
            INVALID,
            f"The experiment {raw_id} must be in the 'active' state. Current state is deleted.",
        )
    if manage and not can_manage(user, experiment):
        raise MlflowError(
            DENIED,
            f"Experiment '{raw_id}' belongs to {experiment.owner}; only its owner or "
            "staff may add runs to it.",
        )
    return experiment


def experiment_deleted(experiment: Experiment) -> bool:
    """Whether the experiment is in MLflow's "deleted" stage."""
    return TrackedExperiment.objects.filter(
        experiment=experiment, deleted_time__isnull=False
    ).exists()


def experiment_by_name(user, name: str) -> Experiment | None:
    """The caller's own experiment of that name ("Default" is MLflow's "0"): the one holding
    the name, else (made on Troupe's pages, which do not claim names) the oldest of it."""
    if name == "Default":
        return default_experiment(user, create=False)
    tracked = TrackedExperiment.objects.filter(owner=user, name=name).select_related("experiment")
    if found := tracked.first():
        return found.experiment
    return Experiment.objects.filter(owner=user, name=name).order_by("id").first()


def readable_by_name(user, name: str) -> Experiment | None:
    """experiments/get-by-name: the caller's own experiment of that name, else, for
    `<user>/<name>`, that teammate's (names are per owner, so a bare name is always yours)."""
    found = experiment_by_name(user, name)
    owner_name, _, rest = name.partition("/")
    if found is not None or not rest:
        return found
    owner = get_user_model().objects.filter(username=owner_name).first()
    return None if owner is None else experiment_by_name(owner, rest)


def create_experiment(user, name: str, tags: dict[str, str]) -> Experiment:
    """A new experiment holding `name` among the user's. The check first gives the common
    case its answer without a failed insert; the unique (owner, name) row decides a race."""
    exists = MlflowError(EXISTS, f"Experiment '{name}' already exists.")
    if experiment_by_name(user, name) is not None or name == "Default":
        raise exists
    try:
        with transaction.atomic():
            experiment = Experiment.objects.create(
                owner=user, name=name, description="Logged through the MLflow API."
            )
            TrackedExperiment.objects.create(
                experiment=experiment, owner=user, name=name, tags=tags
            )
    except IntegrityError:
        raise exists from None
    return experiment


# --- runs ----------------------------------------------------------------------------------------


def _new_uuid() -> str:
    while True:  # an all-digit id would read as a Troupe run number
        value = secrets.token_hex(16)
        if not value.isdecimal():
            return value


def find_run(
    user, raw_id: str, *, manage: bool = False, active: bool = True, rider: Rider | None = None
) -> Run:
    """The run with MLflow id `raw_id` (32 hex) or Troupe number ("12"), its `tracked` row
    loaded when it has one. With `manage`: an external run the user may change, and (unless
    not `active`: deleting and restoring) not a deleted one, as MLflow refuses to log into
    a deleted run. `rider`: `lookups.run_rider(raw_id)`, sent with the request's token query."""
    if rider is not None and rider.done and rider.key == raw_id:
        run = rider.result
    elif (number := whole_number(raw_id)) is not None and number <= INT_MAX:
        run = lookups.run_by_id(number)
    else:
        run = lookups.run_by_uuid(raw_id)
    if run is None:
        raise MlflowError(MISSING, f"Run '{raw_id}' not found.")
    if manage:
        if active and is_deleted(run):
            raise MlflowError(
                INVALID,
                f"The run {raw_id} must be in the 'active' state. Current state is deleted.",
            )
        if not can_manage(user, run.experiment):
            raise MlflowError(
                DENIED,
                f"Run '{raw_id}' belongs to experiment '{run.experiment.name}' of "
                f"{run.experiment.owner}; only its owner or staff may log into it.",
            )
        if not run.external:
            raise MlflowError(
                "INVALID_STATE",
                f"Run '{raw_id}' is trained by a Troupe worker, which logs its "
                "metrics itself; log into a run made by runs/create.",
            )
    return run


def tracked_of(run: Run) -> TrackedRun:
    """The run's MLflow row; an external run made by /api/v1/runs gets one on first use,
    keeping its number as its id."""
    try:
        return run.tracked
    except TrackedRun.DoesNotExist:
        tracked, _ = TrackedRun.objects.get_or_create(
            run=run, defaults={"uuid": str(run.id), "start_time": to_ms(run.started)}
        )
        run.tracked = tracked
        return tracked


def is_deleted(run: Run) -> bool:
    """Whether the run is in MLflow's "deleted" stage (its `tracked` row as loaded)."""
    try:
        return run.tracked.deleted_time is not None
    except TrackedRun.DoesNotExist:
        return False


def is_alias(run: Run, key: str) -> bool:
    """Whether `key` of the run is only Troupe's copy of a key the client logged (its
    `train/loss`, `eval/accuracy`, `role/<x>/grad_norm`): MLflow's reads answer as for a
    key never logged, while Troupe's own pages read the copy by that name."""
    try:
        return key in run.tracked.aliases
    except TrackedRun.DoesNotExist:
        return False


def mlflow_run_id(run: Run) -> str:
    try:
        return run.tracked.uuid
    except TrackedRun.DoesNotExist:
        return str(run.id)


def create_run(
    user,
    experiment: Experiment,
    *,
    name: str,
    start_time: int | None,
    tags: dict[str, str],
    user_id: str,
) -> Run:
    name = name or tags.get(RUN_NAME_TAG) or f"mlflow-{secrets.token_hex(3)}"
    start_time = start_time or now_ms()
    tags, cut = cut_values("tags", tags, TAG_VALUE_LIMIT)
    with transaction.atomic():
        run = Run.objects.create(
            experiment=experiment,
            name=name[:200],
            external=True,
            status=Run.RUNNING,
            started=to_datetime(start_time),
        )
        tracked = TrackedRun.objects.create(
            run=run,
            uuid=_new_uuid(),
            user_id=user_id or user.get_username(),
            start_time=start_time,
            tags={**tags, RUN_NAME_TAG: name},
            cut={"tags": cut} if cut else {},
        )
        _apply_fields(run, tracked)
        RunLog.objects.create(run=run, line=f"MLflow run {tracked.uuid} created by {user}.")
        _say_cut(run.id, tracked.uuid, {"tags": cut})
    # A data directory kept across a new database would show an older run's files under
    # this one's number; nobody can upload before this returns the run's id.
    artifacts.clear(run.id)
    run.tracked = tracked
    return run


def _cell_value(tracked: TrackedRun, field: str) -> str | None:
    """A tag or param `field`, or `troupe.<field>` / `troupe/<field>`: verl logs its whole
    Hydra config as params, flattened with "/", so `+troupe.workflow=voting` on its command
    line arrives as param `troupe/workflow`."""
    for name in (field, f"troupe.{field}", f"troupe/{field}"):
        for source in (tracked.tags, tracked.params):
            if name in source:
                return str(source[name])
    return None


def _apply_fields(run: Run, tracked: TrackedRun) -> None:
    """Copy the cell, seed, step count and name out of the tags and params into the run's
    columns (the matrix groups by them), and the params into its config."""
    fields = ["config"]
    run.config = dict(tracked.params)
    given = {f: v for f in MATRIX_AXES if (v := _cell_value(tracked, f)) is not None}
    given.update({name: tracked.params[name] for name in STEPS_PARAMS if name in tracked.params})
    # The one rule of external runs (the JSON API's too); what does not fit is left out, since
    # MLflow accepted the tag.
    columns = run_columns(given, steps_fields=STEPS_PARAMS)
    for axis, value in columns.cell.items():
        setattr(run, axis, value)
        fields.append(axis)
    if columns.seed is not None:
        run.seed = columns.seed
        fields.append("seed")
    if columns.total_steps is not None:
        run.total_steps = columns.total_steps
        fields.append("total_steps")
    if (name := tracked.tags.get(RUN_NAME_TAG)) and name != run.name:
        run.name = name[:200]
        fields.append("name")
    run.save(update_fields=fields)


def _checked_pairs(kind: str, pairs: Iterable, value_limit: int | None) -> dict[str, str]:
    """{key: value} of a list of {"key", "value"} (a param's or tag's), every one checked;
    a value over `value_limit` refused (None: kept whole, for the store to cut)."""
    out: dict[str, str] = {}
    for pair in pairs:
        if not isinstance(pair, dict):
            raise MlflowError(INVALID, f"Each {kind} must be an object {{key, value}}.")
        key = entity_name(kind, pair.get("key"))
        value = pair.get("value", "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            value = str(value)
        if value_limit is not None and len(value) > value_limit:
            raise MlflowError(
                INVALID,
                f"The value of {kind} '{key}' is {len(value)} characters "
                f"long; the limit is {value_limit}.",
            )
        if "\x00" in key or "\x00" in value:
            raise MlflowError(INVALID, f"{kind.capitalize()} '{key}' holds a NUL character.")
        if kind == "param" and out.get(key, value) != value:
            raise MlflowError(INVALID, f"Param '{key}' is given twice with different values.")
        out[key] = value
    return out


def checked_tags(pairs: Iterable, limit: int | None = None) -> dict[str, str]:
    """A run's tags, values of any length (the store cuts them), or refused over `limit`."""
    return _checked_pairs("tag", pairs, limit)


def checked_params(pairs: Iterable, limit: int | None = None) -> dict[str, str]:
    """A run's params, values of any length (the store cuts them), or refused over `limit`."""
    return _checked_pairs("param", pairs, limit)


def checked_experiment_tags(pairs: Iterable) -> dict[str, str]:
    """An experiment's tags: MLflow refuses a value over 20,000 characters, as this does."""
    return _checked_pairs("tag", pairs, EXPERIMENT_TAG_LIMIT)


def cut_values(kind: str, values: dict[str, str], limit: int) -> tuple[dict, dict[str, int]]:
    """`values` with each one over `limit` cut to its first `limit` characters (MLflow's
    server does the same), and {key: characters sent} of those cut."""
    cut = {key: len(value) for key, value in values.items() if len(value) > limit}
    if not cut:
        return values, {}
    return {key: value[:limit] for key, value in values.items()}, cut


def _say_cut(run_id: int, uuid: str, cut: dict[str, dict[str, int]]) -> None:
    """Say in the run's log and the server's which values were cut (MLflow says nothing)."""
    limits = {"params": PARAM_VALUE_LIMIT, "tags": TAG_VALUE_LIMIT}
    lines = [
        f"{kind[:-1].capitalize()} '{key}' was cut to its first {limits[kind]:,} of "
        f"{length:,} characters (MLflow's limit; the rest of the batch was stored)."
        for kind, values in cut.items()
        for key, length in values.items()
    ]
    for line in lines:
        log.warning("MLflow run %s: %s", uuid, line)
    RunLog.objects.bulk_create([RunLog(run_id=run_id, line=line) for line in lines])


def _record_cut(tracked: TrackedRun, params: dict, tags: dict, cut: dict) -> None:
    """Merge this batch's cuts into the run's record: a tag set again whole loses its mark
    (a param never changes value, so its mark stays)."""
    record = {kind: dict(tracked.cut.get(kind, {})) for kind in ("params", "tags")}
    for key in tags:
        record["tags"].pop(key, None)
    for kind in ("params", "tags"):
        record[kind].update(cut.get(kind, {}))
    tracked.cut = {kind: values for kind, values in record.items() if values}


def check_limits(n_metrics: int, n_params: int, n_tags: int) -> None:
    problems = []
    if n_metrics > MAX_METRICS:
        problems.append(f"{n_metrics} metrics (at most {MAX_METRICS})")
    if n_params > MAX_PARAMS:
        problems.append(f"{n_params} params (at most {MAX_PARAMS})")
    if n_tags > MAX_TAGS:
        problems.append(f"{n_tags} tags (at most {MAX_TAGS})")
    if n_metrics + n_params + n_tags > MAX_ENTITIES:
        problems.append(f"{n_metrics + n_params + n_tags} entities (at most {MAX_ENTITIES})")
    if problems:
        raise MlflowError(
            INVALID,
            "A batch may hold at most 1000 metrics, 100 params, 100 tags and 1000 "
            f"entities in all; this one holds {', '.join(problems)}. Nothing was stored.",
        )


def log_batch(
    run: Run,
    points: list[Point],
    params: dict[str, str],
    tags: dict[str, str],
    *,
    replace: bool = False,
) -> int:
    """Store one checked batch; returns the points written (aliases included).

    Param values are immutable (MLflow's rule): a different value for a logged param is an
    error, and then nothing of the batch is stored. `replace`: a point overwrites the one at
    its (key, step) instead of joining it (the offline importer: importing a log again).
    """
    params, cut_params = cut_values("params", params, PARAM_VALUE_LIMIT)
    tags, cut_tags = cut_values("tags", tags, TAG_VALUE_LIMIT)
    cut = {"params": cut_params, "tags": cut_tags}
    tracked = tracked_of(run)
    for key, value in params.items():
        if key in tracked.params and tracked.params[key] != value:
            raise MlflowError(
                INVALID,
                f"Changing param values is not allowed. Param '{key}' was logged with "
                f"value '{tracked.params[key]}' for run '{tracked.uuid}'; attempted '{value}'.",
            )
    keys = list(dict.fromkeys(p.key for p in points))
    with transaction.atomic():
        # One writer a run at a time. Two batches logging one (key, step) at once (the async
        # logger's workers do) must each see the other's point, or one would overwrite the
        # other instead of keeping it (`repeats.py`); params and tags merge into this row.
        # Lock order: this row, then the run's (its step), then its points.
        tracked = TrackedRun.objects.select_for_update().get(run=run)
        if params or tags or _needs_bookkeeping(tracked, keys):
            for key, value in params.items():  # re-checked under the lock
                if tracked.params.get(key, value) != value:
                    raise MlflowError(INVALID, f"Changing param values is not allowed ('{key}').")
            tracked.params.update(params)
            tracked.tags.update(tags)
            if not tracked.accuracy_key:
                chosen = keymap.accuracy_source(keys, _cell_value(tracked, "accuracy_key"))
                tracked.accuracy_key = chosen or ""
            _settle_aliases(run.id, tracked, keys)
            _record_cut(tracked, params, tags, cut)
            tracked.save(
                update_fields=["params", "tags", "accuracy_key", "aliases", "shadowed", "cut"]
            )
            if params or tags:
                _apply_fields(run, tracked)
            _say_cut(run.id, tracked.uuid, cut)
        run.tracked = tracked
        written = _write(run.id, points, tracked, replace)
    return written


def _settle_aliases(run_id: int, tracked: TrackedRun, keys: list[str]) -> None:
    """Record which Troupe keys the batch's keys are copied to (`aliases`) and which the
    client logs itself (`shadowed`: never copied to). A Troupe key the client now logs
    itself after an alias filled it loses the copies: it reads back only what was logged.
    Runs under the lock on the run's row."""
    claimed = [key for key in keys if key in tracked.aliases]
    for key in claimed:
        tracked.shadowed[key] = tracked.aliases.pop(key)
    if claimed:
        delete_series(run_id, claimed)
    mapped = keymap.mappings(keys, tracked.accuracy_key or None)
    fresh = {
        troupe: original
        for original, troupe in mapped.items()
        if troupe not in tracked.aliases and troupe not in tracked.shadowed
    }
    own = set(keys) | stored_keys(run_id, list(fresh))  # not aliases: the client's own
    for troupe, original in fresh.items():
        (tracked.shadowed if troupe in own else tracked.aliases)[troupe] = original


def _needs_bookkeeping(tracked: TrackedRun, keys: list[str]) -> bool:
    """Whether a metrics-only batch must update the run's row: a new alias to remember, a
    Troupe key logged by the client that an alias filled so far, or an accuracy key still
    to choose."""
    if any(key in tracked.aliases for key in keys):
        return True
    mapped = keymap.mappings(keys, tracked.accuracy_key or None)
    if any(t not in tracked.aliases and t not in tracked.shadowed for t in mapped.values()):
        return True
    return (
        not tracked.accuracy_key
        and keymap.accuracy_source(keys, _cell_value(tracked, "accuracy_key")) is not None
    )


def _write(run_id: int, points: list[Point], tracked: TrackedRun, replace: bool) -> int:
    if not points:
        return 0
    times: dict[int, int] = {}
    for p in points:
        times.setdefault(p.step, p.timestamp)  # the step's time: its first point's
    # System metrics count their own samples as steps (MLflow's monitor logs one every 10 s),
    # so only training keys say how far the run is.
    trained = [p.step for p in points if not p.key.startswith(SYSTEM_PREFIX)]
    last = max(trained, default=None)
    # The run's step column counts training steps: MLflow's wider ones are clamped into it.
    before = write_step_times(run_id, times, None if last is None else min(max(last, 0), INT_MAX))
    if not replace:  # one point a (key, step) stands in the metric table; the others beside
        points = standing_points(run_id, points, set(before))
    plain = keymap.map_points(
        [(p.key, p.step, p.value) for p in points],
        tracked.accuracy_key or None,
        own=tracked.shadowed,
    )
    written = record_points(run_id, plain)
    _write_point_times(run_id, points, {**times, **before}, before)
    # Which gaps were ±inf (`PointSign`); no query for a batch of finite values.
    if odd := {(p.key, p.step): p.value for p in points if not math.isfinite(p.value)}:
        write_signs(run_id, odd)
    return written


def _write_point_times(
    run_id: int, points: list[Point], step_times: dict[int, int], before: dict[int, int]
) -> None:
    """Own rows for the points whose time is not their step's; a point logged again at its
    step's time loses the row an earlier time gave it. Nothing to do, and no query, for a
    batch of new steps each logged at one time (the common case)."""
    own = {(p.key, p.step): p.timestamp for p in points if p.timestamp != step_times[p.step]}
    again = {(p.key, p.step) for p in points if p.step in before} - own.keys()
    if own or again:
        write_point_times(run_id, own, again)


def update_run(run: Run, *, status: str | None, end_time: int | None, name: str) -> Run:
    """runs/update: a new status (a finished one records the end time), end time, name."""
    tracked_of(run)
    with transaction.atomic():
        # The row as it stands, locked (log_batch's lock order: this row first): a tag set
        # by a batch that committed after this request read the run must not be overwritten.
        tracked = TrackedRun.objects.select_for_update().get(run=run)
        run.tracked = tracked
        _update_run(run, tracked, status=status, end_time=end_time, name=name)
    return run


def _update_run(
    run: Run, tracked: TrackedRun, *, status: str | None, end_time: int | None, name: str
) -> None:
    fields = []
    if status:
        if status not in TO_TROUPE:
            raise MlflowError(
                INVALID, f"Status must be one of {', '.join(TO_TROUPE)}, not {status!r}."
            )
        run.status = TO_TROUPE[status]
        fields.append("status")
        if run.status in Run.FINISHED:
            tracked.end_time = end_time or tracked.end_time or now_ms()
            run.finished = to_datetime(tracked.end_time)
            if run.status == Run.FAILED and not run.error_type:
                run.error_type, run.error_message = "ExternalError", "Marked FAILED by the client."
                fields += ["error_type", "error_message"]
        else:  # resumed: running (or scheduled) again
            tracked.end_time = None
            run.finished = None
        fields.append("finished")
    elif end_time is not None:
        tracked.end_time = end_time
        run.finished = to_datetime(end_time)
        fields.append("finished")
    if name:
        run.name = name[:200]
        tracked.tags[RUN_NAME_TAG] = name
        fields.append("name")
    tracked.save(update_fields=["end_time", "tags"])
    if fields:
        run.save(update_fields=fields)
    if status and run.status in Run.FINISHED:
        settle_run(run.id)  # the radar's verdict on the ended run, with its end


# --- changing and deleting -----------------------------------------------------------------------


def _tracked_experiment(experiment: Experiment) -> TrackedExperiment:
    """The experiment's MLflow row; one made on Troupe's pages gets one (claiming its name
    only when no other experiment of its owner holds it)."""
    tracked = TrackedExperiment.objects.filter(experiment=experiment).first()
    if tracked is None:
        taken = TrackedExperiment.objects.filter(owner=experiment.owner, name=experiment.name)
        tracked = TrackedExperiment.objects.create(
            experiment=experiment,
            owner=experiment.owner,
            name=None if taken.exists() else experiment.name,
        )
    return tracked


def rename_experiment(experiment: Experiment, new_name: str) -> None:
    """experiments/update: the new name, unique among the owner's (the database decides)."""
    if (
        new_name == "Default"
        or TrackedExperiment.objects.filter(
            experiment=experiment, default_of__isnull=False
        ).exists()
    ):
        raise MlflowError(
            INVALID,
            "Experiment '0' is each user's 'Default' and keeps that "
            "name; 'Default' names no other experiment.",
        )
    try:
        with transaction.atomic():
            tracked = _tracked_experiment(experiment)
            tracked.owner, tracked.name = experiment.owner, new_name
            tracked.save(update_fields=["owner", "name", "updated"])
            experiment.name = new_name
            experiment.save(update_fields=["name"])
    except IntegrityError:
        raise MlflowError(EXISTS, f"Experiment '{new_name}' already exists.") from None


def set_experiment_tag(experiment: Experiment, key: str, value: str) -> None:
    with transaction.atomic():
        tracked = _tracked_experiment(experiment)
        tracked = TrackedExperiment.objects.select_for_update().get(pk=tracked.pk)
        tracked.tags[key] = value
        tracked.save(update_fields=["tags", "updated"])


def delete_experiment(experiment: Experiment) -> None:
    """experiments/delete, as MLflow's store does it: the experiment and every run of it go
    to the "deleted" stage (hidden from searches and Troupe's lists, data kept) until
    `restore_experiment`, or until `purge_deleted` removes them for good."""
    if TrackedExperiment.objects.filter(experiment=experiment, default_of__isnull=False).exists():
        raise MlflowError(INVALID, "The default experiment '0' cannot be deleted.")
    if experiment.runs.filter(status=Run.RUNNING, external=False).exists():
        raise MlflowError(
            "INVALID_STATE",
            f"Experiment '{experiment.id}' has runs a Troupe "
            "worker is training: cancel them first.",
        )
    with transaction.atomic():
        tracked = _tracked_experiment(experiment)
        tracked = TrackedExperiment.objects.select_for_update().get(pk=tracked.pk)
        if tracked.deleted_time is not None:  # MLflow looks it up among active ones only
            raise MlflowError(MISSING, f"No active experiment with id '{experiment.id}'.")
        tracked.deleted_time = now_ms()
        tracked.save(update_fields=["deleted_time", "updated"])
        _mark_runs(experiment, tracked.deleted_time)


def restore_experiment(experiment: Experiment) -> None:
    """experiments/restore: the experiment and all its runs active again (MLflow restores
    every run of it, those deleted one by one before included)."""
    with transaction.atomic():
        tracked = TrackedExperiment.objects.select_for_update().filter(experiment=experiment)
        tracked = tracked.first()
        if tracked is None or tracked.deleted_time is None:
            raise MlflowError(MISSING, f"No deleted experiment with id '{experiment.id}'.")
        tracked.deleted_time = None
        tracked.save(update_fields=["deleted_time", "updated"])
        _mark_runs(experiment, None)


def _mark_runs(experiment: Experiment, deleted_time: int | None) -> None:
    """Every run of the experiment deleted at `deleted_time`, or active (None). A run with no
    MLflow row yet (one Troupe trained) gets one, keeping its number as its id."""
    for run in experiment.runs.filter(tracked__isnull=True):
        tracked_of(run)
    TrackedRun.objects.filter(run__experiment=experiment).update(deleted_time=deleted_time)


def delete_run(run: Run) -> None:
    """runs/delete: the run goes to MLflow's "deleted" stage (`get_run` still answers it,
    searches and Troupe's lists leave it out); `restore_run` brings it back."""
    tracked_of(run)
    TrackedRun.objects.filter(run=run).update(deleted_time=now_ms())


def restore_run(run: Run) -> None:
    tracked_of(run)
    TrackedRun.objects.filter(run=run).update(deleted_time=None)


def purge_deleted(older_than_ms: int | None = None) -> tuple[int, int]:
    """Remove for good what is deleted (MLflow's `mlflow gc`): the deleted experiments, with
    all their runs, and the deleted runs, with their points and files. `older_than_ms`: only
    what was deleted at least that long ago. Returns (experiments, runs) removed."""
    cutoff = now_ms() - (older_than_ms or 0)
    experiments = list(Experiment.objects.filter(tracked__deleted_time__lte=cutoff))
    n_runs = 0
    for experiment in experiments:
        with transaction.atomic():
            n_runs += len(delete_runs(experiment.runs.all()))
            experiment.delete()
    runs = Run.objects.filter(tracked__deleted_time__lte=cutoff)
    n_runs += len(delete_runs(runs))
    return len(experiments), n_runs


def delete_tag(run: Run, key: str) -> None:
    """runs/delete-tag: MLflow answers RESOURCE_DOES_NOT_EXIST for a tag the run lacks."""
    with transaction.atomic():
        tracked = TrackedRun.objects.select_for_update().get(run=run)
        if key not in tracked.tags:
            raise MlflowError(MISSING, f"No tag with name: {key} in run with id {tracked.uuid}.")
        del tracked.tags[key]
        tracked.save(update_fields=["tags"])


# --- inputs --------------------------------------------------------------------------------------

MAX_INPUTS = 1000  # datasets one request may carry
DATASET_FIELDS = {
    "name": 500,
    "digest": 36,
    "source_type": 36,
    "source": 65535,
    "schema": 1048576,
    "profile": 16384,
}  # MLflow's column sizes


def checked_inputs(entries: list) -> list[dict]:
    """The datasets of a log-inputs request, each checked: [{"tags", "dataset"}]."""
    if len(entries) > MAX_INPUTS:
        raise MlflowError(
            INVALID,
            f"At most {MAX_INPUTS} datasets a request; this one holds "
            f"{len(entries)}. Nothing was stored.",
        )
    out = []
    for i, entry in enumerate(entries):
        dataset = entry.get("dataset") if isinstance(entry, dict) else None
        if not isinstance(dataset, dict):
            raise MlflowError(INVALID, f"datasets[{i}] must be an object {{tags, dataset}}.")
        checked = {}
        for field, limit in DATASET_FIELDS.items():
            value = dataset.get(field)
            if value is None:
                if field in ("name", "digest", "source_type", "source"):
                    raise MlflowError(INVALID, f"datasets[{i}].dataset needs '{field}'.")
                continue
            if not isinstance(value, str) or len(value) > limit or "\x00" in value:
                raise MlflowError(
                    INVALID,
                    f"datasets[{i}].dataset.{field} must be a string of "
                    f"at most {limit} characters.",
                )
            checked[field] = value
        tags = checked_tags(entry.get("tags") or [], limit=TAG_VALUE_LIMIT)
        out.append({"tags": [{"key": k, "value": v} for k, v in tags.items()], "dataset": checked})
    return out


def log_inputs(run: Run, inputs: list[dict]) -> None:
    """Add the datasets; one already logged (same name and digest) keeps its first entry."""
    with transaction.atomic():
        tracked = TrackedRun.objects.select_for_update().get(run=run)
        seen = {(i["dataset"]["name"], i["dataset"]["digest"]) for i in tracked.inputs}
        for entry in inputs:
            key = (entry["dataset"]["name"], entry["dataset"]["digest"])
            if key not in seen:
                tracked.inputs.append(entry)
                seen.add(key)
        tracked.save(update_fields=["inputs"])
