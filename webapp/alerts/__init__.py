"""The live radar: its Celery task, the alerts it raises, their page and API."""
