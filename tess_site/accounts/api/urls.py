from django.urls import path

from . import views

urlpatterns = [
    path("auth/token/", views.TokenExchangeView.as_view(), name="auth-token"),
    path("me/", views.MeView.as_view(), name="me"),
    path("me/tenant/", views.SelectTenantView.as_view(), name="me-tenant"),
]
