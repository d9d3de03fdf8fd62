"""A swap job's heartbeat and attempts: a job whose worker died is queued again."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("attribution", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="swapjob",
            name="attempts",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="swapjob",
            name="heartbeat",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
