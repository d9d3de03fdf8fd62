"""A branched run's `init_from` names its frozen checkpoint relative to the data directory.

Rows from before store the absolute path of the branch point, which every signed-in user saw
in the run's config. Rewritten to `branch-points/run-<id>-<random>/checkpoints/<name>` (any
other path inside the data directory relative to it), the run still resumes: the worker joins
it to its data directory and the trainer gets the same folder (workers/branch_points.py).
A path elsewhere (a row written by hand) is left as it is: a worker refuses it either way.

What workers stored before they wrote the data directory as `$TROUPE_DATA_DIR` (a failed
run's error and traceback, its phase and log lines, a swap job's error) is rewritten so too.
"""

import re
from pathlib import Path

from django.conf import settings
from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Replace

_FROZEN = re.compile(r"/(branch-points/run-\d+-[0-9a-f]+/checkpoints/[^/]+)$")


def data_relative(value, data: Path):
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    if match := _FROZEN.search(value):
        return match.group(1)
    path = Path(value)
    return path.relative_to(data).as_posix() if path.is_relative_to(data) else value


def rewrite(apps, schema_editor):
    data = Path(settings.DATA_DIR)
    for model, field in (("Run", "config"), ("Experiment", "base_config")):
        rows = apps.get_model("experiments", model).objects
        for row in rows.filter(**{f"{field}__init_from__startswith": "/"}).iterator():
            config = getattr(row, field)
            new = data_relative(config.get("init_from"), data)
            if new != config.get("init_from"):
                setattr(row, field, {**config, "init_from": new})
                row.save(update_fields=[field])


TEXTS = {
    ("experiments", "Run"): ("error_message", "error_traceback", "phase"),
    ("experiments", "RunLog"): ("line",),
    ("attribution", "SwapJob"): ("error",),
}


def tidy_texts(apps, schema_editor):
    data = str(Path(settings.DATA_DIR))
    for (app, model), fields in TEXTS.items():
        rows = apps.get_model(app, model).objects
        for field in fields:
            found = rows.filter(**{f"{field}__contains": data})
            found.update(**{field: Replace(field, Value(data), Value("$TROUPE_DATA_DIR"))})


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0010_run_queue_order_and_worker_memory"),
        ("attribution", "0003_swap_job_cancel"),
    ]

    operations = [
        migrations.RunPython(rewrite, migrations.RunPython.noop),
        migrations.RunPython(tidy_texts, migrations.RunPython.noop),
    ]
