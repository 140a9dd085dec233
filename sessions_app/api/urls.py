from django.urls import URLPattern, URLResolver, path

from . import turn_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("sessions/", views.SessionListView.as_view(), name="sessions"),
    path("sessions/discovered/", views.DiscoveredView.as_view(), name="sessions-discovered"),
    path("sessions/<str:session_id>/", views.SessionDetailView.as_view(), name="session"),
    path("sessions/<str:session_id>/tree/", views.SessionTreeView.as_view(), name="session-tree"),
    path("sessions/<str:session_id>/events/", views.SessionEventsView.as_view(), name="session-events"),
    path("sessions/<str:session_id>/turns/", turn_views.SessionTurnsView.as_view(), name="session-turns"),
    path("sessions/<str:session_id>/messages/", views.SessionMessagesView.as_view(), name="session-messages"),
    path("sessions/<str:session_id>/attach/", views.SessionAttachView.as_view(), name="session-attach"),
    path("sessions/<str:session_id>/detach/", views.SessionDetachView.as_view(), name="session-detach"),
    path("sessions/<str:session_id>/terminate/", views.SessionTerminateView.as_view(), name="session-terminate"),
]
