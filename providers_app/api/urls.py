from django.urls import URLPattern, URLResolver, path

from . import catalog_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("providers/", views.ProviderInventoryView.as_view(), name="providers"),
    path("catalog/", catalog_views.CatalogView.as_view(), name="catalog"),
]
