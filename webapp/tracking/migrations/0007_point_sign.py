"""The sign of a point logged as ±inf, for MLflow's readers."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0005_metric_point_without_fk_constraint"),
        ("tracking", "0006_logged_model"),
    ]

    operations = [
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
                ("key", models.CharField(max_length=200)),
                ("step", models.IntegerField()),
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
        ),
    ]
