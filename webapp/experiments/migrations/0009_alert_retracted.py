"""A provisional alert the radar stops reporting is kept as retracted (when, and why in
words) instead of deleted."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0008_mlflow_steps_and_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="alert",
            name="retracted",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="alert",
            name="retraction",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
