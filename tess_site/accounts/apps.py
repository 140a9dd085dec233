from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Identity and tenancy: tenants, memberships, personal tokens, linked external identities."""

    name = "tess_site.accounts"
    label = "accounts"
    verbose_name = "Identity and tenancy"
    default_auto_field = "django.db.models.BigAutoField"
