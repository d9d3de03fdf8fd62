"""The Troupe Django project: settings, URLs, WSGI entry point, and its apps."""
