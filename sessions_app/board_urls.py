"""``/board/``: the fleet board, behind the Django admin login."""

from django.contrib import admin
from django.urls import path

from . import board_views

app_name = "board"

urlpatterns = [path("", admin.site.admin_view(board_views.board), name="page")]
