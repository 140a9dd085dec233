"""The one-time approval pages, outside the API: ``/approvals/<token>/``."""

from django.urls import path

from . import views

app_name = "approvals"

urlpatterns = [
    path("<str:token>/", views.approval_page, name="page"),
]
