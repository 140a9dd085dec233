from django.urls import URLPattern, URLResolver, path

from . import catalog_views, turn_views, usage_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("sessions/", views.SessionListView.as_view(), name="sessions"),
    path("sessions/discovered/", views.DiscoveredView.as_view(), name="sessions-discovered"),
    path("sessions/<str:session_id>/", views.SessionDetailView.as_view(), name="session"),
    path("sessions/<str:session_id>/tree/", views.SessionTreeView.as_view(), name="session-tree"),
    path("sessions/<str:session_id>/events/", views.SessionEventsView.as_view(), name="session-events"),
    path("sessions/<str:session_id>/screen/", views.SessionScreenView.as_view(), name="session-screen"),
    path("sessions/<str:session_id>/turns/", turn_views.SessionTurnsView.as_view(), name="session-turns"),
    path(
        "sessions/<str:session_id>/turns/<str:turn_id>/stop/",
        turn_views.SessionTurnStopView.as_view(),
        name="session-turn-stop",
    ),
    path("sessions/<str:session_id>/messages/", views.SessionMessagesView.as_view(), name="session-messages"),
    path("sessions/<str:session_id>/attach/", views.SessionAttachView.as_view(), name="session-attach"),
    path("sessions/<str:session_id>/detach/", views.SessionDetachView.as_view(), name="session-detach"),
    path("sessions/<str:session_id>/terminate/", views.SessionTerminateView.as_view(), name="session-terminate"),
    path("catalog/<str:tool_id>/invoke/", catalog_views.CatalogInvokeView.as_view(), name="catalog-invoke"),
    path("sessions/<str:session_id>/cutover/", views.SessionCutoverView.as_view(), name="session-cutover"),
    path("sessions/<str:session_id>/rollback/", views.SessionRollbackView.as_view(), name="session-rollback"),
    path("sessions/<str:session_id>/bind/", views.SessionBindView.as_view(), name="session-bind"),
    path("sessions/<str:session_id>/migrations/", views.SessionMigrationsView.as_view(), name="session-migrations"),
    path("usage/", usage_views.UsageView.as_view(), name="usage"),
]
