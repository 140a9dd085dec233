from django.urls import path

from . import coding_views, operational_views, views

urlpatterns = [
    path("memory/", views.MemoryView.as_view(), name="memory"),
    path("memory/cards/", views.MemoryCardProposeView.as_view(), name="memory-cards"),
    path("memory/operational/", operational_views.OperationalMemoryView.as_view(), name="operational-memory"),
    path(
        "memory/operational/stats/",
        operational_views.OperationalMemoryStatsView.as_view(),
        name="operational-memory-stats",
    ),
    path(
        "memory/operational/<str:record_id>/",
        operational_views.OperationalMemoryRecordView.as_view(),
        name="operational-memory-record",
    ),
    path("coding-memory/", coding_views.CodingMemoryListView.as_view(), name="coding-memory"),
    path("coding-memory/export/", coding_views.CodingMemoryExportView.as_view(), name="coding-memory-export"),
    path("coding-memory/<str:entry_id>/", coding_views.CodingMemoryDetailView.as_view(), name="coding-memory-entry"),
    path(
        "coding-memory/<str:entry_id>/review-requests/",
        coding_views.CodingMemoryReviewRequestView.as_view(),
        name="coding-memory-review-requests",
    ),
    path(
        "coding-memory/<str:entry_id>/apply/", coding_views.CodingMemoryApplyView.as_view(), name="coding-memory-apply"
    ),
    path(
        "coding-memory/<str:entry_id>/reject/",
        coding_views.CodingMemoryRejectView.as_view(),
        name="coding-memory-reject",
    ),
    path(
        "coding-memory/<str:entry_id>/retire/",
        coding_views.CodingMemoryRetireView.as_view(),
        name="coding-memory-retire",
    ),
]
