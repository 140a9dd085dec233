from django.urls import path

from . import card_views

urlpatterns = [
    path("cards/", card_views.CardListView.as_view(), name="card-list"),
    path("cards/<uuid:card_id>/", card_views.CardDetailView.as_view(), name="card-detail"),
    path("cards/<uuid:card_id>/confirm/", card_views.CardConfirmView.as_view(), name="card-confirm"),
    path("cards/<uuid:card_id>/dismiss/", card_views.CardDismissView.as_view(), name="card-dismiss"),
]
