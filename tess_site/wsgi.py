"""The WSGI application: HTTP only (the admin, the drawer's pages, the API), served by gunicorn in production
(``deploy/systemd/tess-web.service``). Websockets are the ASGI application's (``tess_site.asgi``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.dev")
application = get_wsgi_application()

from django.conf import settings  # noqa: E402

if settings.TESS_SERVE_STATIC:
    # As in tess_site.asgi: static files from this process unless a web server serves STATIC_ROOT.
    from django.contrib.staticfiles.handlers import StaticFilesHandler

    application = StaticFilesHandler(application)
