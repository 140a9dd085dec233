from django.urls import path

from . import approval_views, handoff_views

urlpatterns = [
    path("handoffs/", handoff_views.HandoffListView.as_view(), name="handoff-list"),
    path("handoffs/<str:handoff_id>/result/", handoff_views.HandoffResultView.as_view(), name="handoff-result"),
    path("approvals/", approval_views.ApprovalListView.as_view(), name="approval-list"),
    path("approvals/<str:approval_id>/", approval_views.ApprovalDetailView.as_view(), name="approval-detail"),
]
