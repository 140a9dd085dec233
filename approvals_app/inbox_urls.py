"""``/inbox/``: the server-rendered inbox, behind the Django admin login."""

from django.contrib import admin
from django.urls import path

from . import inbox_views

app_name = "inbox"

urlpatterns = [
    path("", admin.site.admin_view(inbox_views.inbox_page), name="page"),
    path("settings/", admin.site.admin_view(inbox_views.settings_form), name="settings"),
    path("approvals/<uuid:approval_id>/open/", admin.site.admin_view(inbox_views.open_approval), name="open"),
    path("approvals/<uuid:approval_id>/resend/", admin.site.admin_view(inbox_views.resend_approval), name="resend"),
    path("cards/<uuid:card_id>/confirm/", admin.site.admin_view(inbox_views.confirm_card), name="confirm"),
    path("cards/<uuid:card_id>/dismiss/", admin.site.admin_view(inbox_views.dismiss_card), name="dismiss"),
]
