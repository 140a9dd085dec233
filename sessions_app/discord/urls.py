"""Included once at the root: the interactions endpoint and the link-code API route."""

from django.urls import path

from . import views

urlpatterns = [
    path("integrations/discord/interactions/", views.InteractionsView.as_view(), name="discord-interactions"),
    path("api/v1/identities/discord/link-codes/", views.LinkCodesView.as_view(), name="discord-link-codes"),
]
