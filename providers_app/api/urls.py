from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("providers/", views.ProviderInventoryView.as_view(), name="providers"),
]
