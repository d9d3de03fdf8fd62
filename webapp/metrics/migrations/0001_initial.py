"""The metric store's own tables, moved from the tracking app (its 0011 lets them go).

Django's state only: the tables were made by the tracking app's migrations and keep their
names (`db_table`), so nothing runs on the database and no row is copied, on a fresh
database (where the tracking app's 0001-0010 made them first) as on one that holds points.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("experiments", "0010_run_queue_order_and_worker_memory"),
        ("tracking", "0010_trackedrun_cut"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="PointSign",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "run",
                                "key",
                                "step",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("key", models.CharField(max_length=250)),
                        ("step", models.BigIntegerField()),
                        ("sign", models.SmallIntegerField()),
                        (
                            "run",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="experiments.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tracking_pointsign",
                    },
                ),
                migrations.CreateModel(
                    name="PointTime",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "run",
                                "key",
                                "step",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("key", models.CharField(max_length=250)),
                        ("step", models.BigIntegerField()),
                        ("timestamp", models.BigIntegerField()),
                        (
                            "run",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="experiments.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tracking_pointtime",
                    },
                ),
                migrations.CreateModel(
                    name="StepTime",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "run",
                                "step",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("step", models.BigIntegerField()),
                        ("timestamp", models.BigIntegerField()),
                        (
                            "run",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="experiments.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tracking_steptime",
                    },
                ),
                migrations.CreateModel(
                    name="EarlierPoint",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("key", models.CharField(max_length=250)),
                        ("step", models.BigIntegerField()),
                        ("timestamp", models.BigIntegerField()),
                        ("value", models.FloatField()),
                        ("gap", models.SmallIntegerField(default=0)),
                        (
                            "run",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="experiments.run",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tracking_earlierpoint",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("run", "key", "step", "timestamp", "value", "gap"),
                                name="earlier_point_once",
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
