from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0006_run_radar_due"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerSeen",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                ("gpus", models.PositiveIntegerField()),
                ("seen", models.DateTimeField()),
            ],
        ),
    ]
