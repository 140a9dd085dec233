from django.urls import path

from .consumers import SessionStreamConsumer

websocket_urlpatterns = [path("ws/sessions/<str:session_id>/stream/", SessionStreamConsumer.as_asgi())]
