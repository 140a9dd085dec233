"""The server-rendered Memory disclosure, behind the Django admin login (staff members only)."""

from django.contrib import admin
from django.urls import path

from . import views

app_name = "memory"

urlpatterns = [
    path("", admin.site.admin_view(views.disclosure), name="disclosure"),
    path("propose/", admin.site.admin_view(views.propose), name="propose"),
    path("cards/<uuid:card_id>/", admin.site.admin_view(views.card_page), name="card"),
    path("cards/<uuid:card_id>/confirm/", admin.site.admin_view(views.confirm), name="confirm"),
    path("cards/<uuid:card_id>/dismiss/", admin.site.admin_view(views.dismiss), name="dismiss"),
]
