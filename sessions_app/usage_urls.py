"""``/usage/``: the usage page and its CSV export, behind the Django admin login."""

from django.contrib import admin
from django.urls import path

from . import usage_views

app_name = "usage"

urlpatterns = [
    path("", admin.site.admin_view(usage_views.usage_page), name="page"),
    path("export.csv", admin.site.admin_view(usage_views.usage_csv), name="csv"),
]
