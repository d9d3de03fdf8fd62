"""WSGI entry point: `gunicorn webapp.wsgi`.

Django serves everything but /dash/, where the Dash panel is mounted behind Django's login
(webapp/dashboards/mount.py): one server, one session, one port.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

django_application = get_wsgi_application()

from webapp.dashboards.mount import mount_dash  # noqa: E402  (needs Django set up first)

application = mount_dash(django_application)
