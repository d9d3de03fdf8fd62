"""The rows MLflow's protocol adds to an experiment and a run, moved from the tracking app
(its 0012 lets them go): the run pages, the name claims and the metric store read them too.

Django's state only: the tracking app's migrations made the tables, which keep their names
(`db_table`), so nothing runs on the database and no row is copied.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0011_init_from_relative_to_data_dir"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("tracking", "0011_point_tables_to_the_metric_store"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="TrackedRun",
                    fields=[
                        (
                            "run",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="tracked",
                                serialize=False,
                                to="experiments.run",
                            ),
                        ),
                        ("uuid", models.CharField(max_length=32, unique=True)),
                        ("user_id", models.CharField(blank=True, max_length=200)),
                        ("start_time", models.BigIntegerField(null=True)),
                        ("end_time", models.BigIntegerField(null=True)),
                        ("tags", models.JSONField(default=dict)),
                        ("params", models.JSONField(default=dict)),
                        ("accuracy_key", models.CharField(blank=True, max_length=250)),
                        ("aliases", models.JSONField(default=dict)),
                        ("shadowed", models.JSONField(default=dict)),
                        ("inputs", models.JSONField(default=list)),
                        ("outputs", models.JSONField(default=list)),
                        ("deleted_time", models.BigIntegerField(blank=True, null=True)),
                        ("cut", models.JSONField(default=dict)),
                    ],
                    options={
                        "db_table": "tracking_trackedrun",
                    },
                ),
                migrations.CreateModel(
                    name="TrackedExperiment",
                    fields=[
                        (
                            "experiment",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="tracked",
                                serialize=False,
                                to="experiments.experiment",
                            ),
                        ),
                        ("name", models.CharField(max_length=200, null=True)),
                        ("tags", models.JSONField(default=dict)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        ("deleted_time", models.BigIntegerField(blank=True, null=True)),
                        (
                            "default_of",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="default_mlflow_experiment",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tracking_trackedexperiment",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("owner", "name"), name="mlflow_name_unique_per_owner"
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
