"""One ASGI application for HTTP and websockets."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tess_site.settings.dev")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.TESS_SERVE_STATIC:
    # The drawer's JavaScript and CSS (and the admin's) from this process; behind a web server that serves
    # STATIC_ROOT (collectstatic), set TESS_SERVE_STATIC=0.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from approvals_app.routing import websocket_urlpatterns as approvals_ws  # noqa: E402
from sessions_app.routing import websocket_urlpatterns as sessions_ws  # noqa: E402
from tess_site.ws import DatabaseUnavailableClose, TessWebsocketAuth  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": DatabaseUnavailableClose(TessWebsocketAuth(URLRouter([*approvals_ws, *sessions_ws]))),
    }
)
