"""`python manage.py import_runs PATH… --experiment NAME --owner USER`: TensorBoard event files
and verl `file`-logger JSONL (or Troupe's metrics.jsonl) into one experiment, one external run
per source, with the key mapping of `webapp/tracking/keymap.py`.

Importing the same source again reuses its run (found by the `troupe.source` tag, its absolute
path) and overwrites its points: nothing is duplicated. `--tag workflow=voting` (repeatable)
sets tags on every imported run, so an imported matrix groups into cells; `--accuracy-key`
names the key to show as `eval/accuracy`.

verl's rollout dumps (`trainer.rollout_data_dir`, `webapp/tracking/verl_rollouts.py`) become
episodes: a dump directory (or file) among the paths is a run of its own, holding only
episodes; `--rollouts DIR` attaches a dump to the run imported from the one other path (verl's
file-logger JSONL or event files of the same training). `--rollout-kind eval` marks them as
evaluation episodes (verl's `trainer.validation_data_dir`). Every line is read before anything
is written, so a bad line (named with its file and line number) imports nothing of that run's
episodes; importing again replaces the run's episodes. A run keeps at most 20,000.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from trainer.config import INT_MAX
from webapp.episodes.models import Episode
from webapp.episodes.store import MAX_EPISODES_PER_RUN, write_episodes
from webapp.experiments.models import Experiment, TrackedRun
from webapp.tracking import store
from webapp.tracking.importers import Scalar, Source, find_sources
from webapp.tracking.keymap import MAX_KEY_LENGTH
from webapp.tracking.protocol import MlflowError
from webapp.tracking.verl_rollouts import rollout_records

SOURCE_TAG = "troupe.source"
CHUNK = 5000  # points a write


class Command(BaseCommand):
    help = "Import TensorBoard event files and verl JSONL logs as runs of an experiment."

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="files or directories")
        parser.add_argument("--owner", required=True, help="username owning the experiment")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--experiment", help="experiment name (the owner's; made if missing)")
        target.add_argument("--experiment-id", type=int, help="an existing experiment's id")
        parser.add_argument(
            "--tag",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a tag on every imported run (workflow, task, model, sharing, seed group "
            "runs into matrix cells); repeatable",
        )
        parser.add_argument("--accuracy-key", help="the key to show as eval/accuracy")
        parser.add_argument(
            "--rollouts",
            type=Path,
            help="verl rollout dumps (trainer.rollout_data_dir) to attach, as episodes, to the "
            "run imported from the one other path",
        )
        parser.add_argument(
            "--rollout-kind",
            choices=["train", "eval"],
            default="train",
            help="train (rollout_data_dir, the default) or eval (validation_data_dir)",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, **options) -> None:
        user = get_user_model().objects.filter(username=options["owner"]).first()
        if user is None:
            raise CommandError(f"There is no user {options['owner']!r}.")
        experiment = self._experiment(user, options)
        tags = self._tags(options["tag"])
        if options["accuracy_key"]:
            tags[store.ACCURACY_TAG] = options["accuracy_key"]
        sources: list[Source] = []
        for path in options["paths"]:
            try:
                found = find_sources(path)
            except FileNotFoundError as exc:
                raise CommandError(str(exc)) from None
            if not found:
                raise CommandError(f"{path}: no event files or .jsonl files found")
            sources += found
        attached = self._attached(options, sources)
        for source in sources:
            kind = options["rollout_kind"]
            try:
                # Every line first: a bad one fails before the run is touched.
                records = list(source.episodes(kind)) + attached
                run, points = self._import(user, experiment, source, tags, options)
            except (ValueError, MlflowError) as exc:
                raise CommandError(f"{source.path}: {exc}") from None
            kept = self._episodes(run, records)
            skipped = ", ".join(f"{n} {why}" for why, n in sorted(source.skipped.items()))
            episodes = ""
            if records:
                episodes = f", {kept} episodes"
                if kept < len(records):
                    episodes += f" ({len(records) - kept} past the bound of {MAX_EPISODES_PER_RUN})"
            self.stdout.write(
                f"{source.path}: run {run.id} ({run.name}), {points} points{episodes}"
                + (f"; skipped {skipped}" if skipped else "")
            )
        self.stdout.write(f"Experiment {experiment.id} ({experiment.name}): {len(sources)} runs.")

    def _attached(self, options, sources: list[Source]) -> list[dict]:
        """The episodes of `--rollouts`, read whole (a bad line fails before any import)."""
        path = options["rollouts"]
        if path is None:
            return []
        if len(sources) != 1 or sources[0].kind == "verl_rollouts":
            raise CommandError(
                f"--rollouts attaches to one run: give exactly one metrics source (verl's "
                f"JSONL or event files), not {len(sources)} path(s)"
            )
        if not path.exists():
            raise CommandError(f"--rollouts: {path} does not exist")
        try:
            records = list(rollout_records(path.resolve(), options["rollout_kind"]))
        except ValueError as exc:
            raise CommandError(f"--rollouts: {exc}") from None
        if not records:
            raise CommandError(f"--rollouts: {path} holds no verl rollout lines")
        return records

    @staticmethod
    def _episodes(run, records: list[dict]) -> int:
        """Replace the run's episodes by `records`; how many were kept (the run's bound)."""
        if not records:
            return 0
        Episode.objects.filter(run=run).delete()  # importing again replaces them
        write_episodes(run.id, records)
        return Episode.objects.filter(run=run).count()

    def _experiment(self, user, options) -> Experiment:
        if options["experiment_id"] is not None:
            try:
                return store.find_experiment(user, str(options["experiment_id"]), manage=True)
            except MlflowError as exc:
                raise CommandError(exc.message) from None
        name = options["experiment"].strip()
        if not name:
            raise CommandError("--experiment must not be blank")
        found = store.experiment_by_name(user, name)
        return found or store.create_experiment(user, name, {})

    def _tags(self, pairs: list[str]) -> dict[str, str]:
        tags = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise CommandError(f"--tag {pair!r}: expected KEY=VALUE")
            tags[key.strip()] = value.strip()
        try:
            return store.checked_tags([{"key": k, "value": v} for k, v in tags.items()])
        except MlflowError as exc:
            raise CommandError(exc.message) from None

    def _import(self, user, experiment, source: Source, tags: dict, options):
        path = str(source.path)
        # A JSON lookup would not work on SQLite; an experiment's runs are few enough to scan.
        tracked = next(
            (
                t
                for t in TrackedRun.objects.filter(run__experiment=experiment).select_related("run")
                if t.tags.get(SOURCE_TAG) == path
            ),
            None,
        )
        if tracked is None:
            run = store.create_run(
                user,
                experiment,
                name=source.name,
                start_time=None,
                tags={**tags, SOURCE_TAG: path},
                user_id=user.get_username(),
            )
        else:
            run = tracked.run
            store.update_run(run, status="RUNNING", end_time=None, name="")
            if tags:
                store.log_batch(run, [], {}, tags)
        total, batch, last_wall = 0, [], None
        bar = tqdm(desc=source.name, unit=" points", disable=options["no_progress"], leave=False)
        for scalar in source.scalars():
            if not self._fits(scalar, source):
                continue
            last_wall = max(last_wall or 0, scalar.wall_ms or 0) or None
            batch.append(
                store.Point(scalar.key, scalar.value, scalar.wall_ms or store.now_ms(), scalar.step)
            )
            if len(batch) >= CHUNK:
                total += self._flush(run, batch, bar)
        total += self._flush(run, batch, bar)
        bar.close()
        store.update_run(run, status="FINISHED", end_time=last_wall, name="")
        return run, total

    @staticmethod
    def _fits(scalar: Scalar, source: Source) -> bool:
        if not 0 <= scalar.step <= INT_MAX:
            source.skip("step out of range")
            return False
        if not scalar.key or len(scalar.key) > MAX_KEY_LENGTH or "\x00" in scalar.key:
            source.skip("key not storable")
            return False
        return True

    @staticmethod
    def _flush(run, batch: list, bar) -> int:
        if not batch:
            return 0
        store.log_batch(run, batch, {}, {}, replace=True)  # imported again: overwritten
        bar.update(len(batch))
        count = len(batch)
        batch.clear()
        return count
