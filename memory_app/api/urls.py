from django.urls import path

from . import views

urlpatterns = [
    path("memory/", views.MemoryView.as_view(), name="memory"),
    path("memory/cards/", views.MemoryCardProposeView.as_view(), name="memory-cards"),
]
