from django.urls import path

from .consumers import MeConsumer

websocket_urlpatterns = [path("ws/me/", MeConsumer.as_asgi())]
