from django.urls import path

from .consumers import BoardConsumer, SessionStreamConsumer

websocket_urlpatterns = [
    path("ws/sessions/<str:session_id>/stream/", SessionStreamConsumer.as_asgi()),
    path("ws/board/", BoardConsumer.as_asgi()),
]
