"""The datasets a run logged through runs/log-inputs."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tracking", "0003_experiment_name_unique")]

    operations = [
        migrations.AddField(
            model_name="trackedrun",
            name="inputs",
            field=models.JSONField(default=list),
        ),
    ]
