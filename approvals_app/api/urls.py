from django.urls import path

from . import approval_views, handoff_views, inbox_views

urlpatterns = [
    path("handoffs/", handoff_views.HandoffListView.as_view(), name="handoff-list"),
    path("handoffs/<str:handoff_id>/result/", handoff_views.HandoffResultView.as_view(), name="handoff-result"),
    path("approvals/", approval_views.ApprovalListView.as_view(), name="approval-list"),
    path("approvals/<str:approval_id>/", approval_views.ApprovalDetailView.as_view(), name="approval-detail"),
    path("approvals/<str:approval_id>/open/", inbox_views.ApprovalOpenView.as_view(), name="approval-open"),
    path("approvals/<str:approval_id>/resend/", inbox_views.ApprovalResendView.as_view(), name="approval-resend"),
    path("inbox/", inbox_views.InboxView.as_view(), name="inbox"),
    path("inbox/settings/", inbox_views.InboxSettingsView.as_view(), name="inbox-settings"),
    path("inbox/push-subscriptions/", inbox_views.PushSubscriptionView.as_view(), name="inbox-push"),
]
