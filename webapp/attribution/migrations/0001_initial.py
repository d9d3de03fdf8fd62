"""Swap jobs: mix-and-match evaluations of a run, and which role made its gain."""

import django.db.models.deletion
from django.db import migrations, models

STATUSES = [(s, s) for s in ("queued", "running", "succeeded", "failed")]


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("experiments", "0007_workerseen"),
    ]

    operations = [
        migrations.CreateModel(
            name="SwapJob",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("kind", models.CharField(max_length=20)),
                (
                    "status",
                    models.CharField(choices=STATUSES, default="queued", max_length=20),
                ),
                ("plan", models.JSONField(default=dict)),
                ("evaluations", models.JSONField(default=dict)),
                ("result", models.JSONField(blank=True, null=True)),
                ("error", models.TextField(blank=True)),
                ("worker", models.CharField(blank=True, max_length=200)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("started", models.DateTimeField(blank=True, null=True)),
                ("finished", models.DateTimeField(blank=True, null=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="swap_jobs",
                        to="experiments.run",
                    ),
                ),
            ],
            options={
                "ordering": ["-id"],
                "indexes": [models.Index(fields=["run", "-id"], name="swapjob_run_newest")],
            },
        ),
    ]
