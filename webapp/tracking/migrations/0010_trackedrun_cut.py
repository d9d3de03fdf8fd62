"""The param and tag values cut at MLflow's limits (6,000 and 8,000 characters), by run."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0009_soft_delete"),
    ]

    operations = [
        migrations.AddField(
            model_name="trackedrun",
            name="cut",
            field=models.JSONField(default=dict),
        ),
    ]
