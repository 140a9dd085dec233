from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0012_session_workspace_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="ingressbinding",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
