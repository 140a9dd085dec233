"""The two kill switches: TESS_OPERATOR_MEMORY in the environment and the runtime switch in the database."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command

from memory_app.models import MemorySwitch
from memory_app.switch import memory_scope_for
from tests.conftest import csrf_token, scope_of


def settings_value(env_value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TESS_OPERATOR_MEMORY": env_value, "DJANGO_SETTINGS_MODULE": "tess_site.settings.test"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.TESS_OPERATOR_MEMORY)"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=settings.BASE_DIR, check=False
    )


@pytest.mark.parametrize(("raw", "value"), [("0", "False"), ("off", "False"), ("false", "False"), ("on", "True")])
def test_the_environment_switch_reads_on_and_off(raw, value):
    assert settings_value(raw).stdout.strip() == value


def test_an_environment_value_that_is_neither_on_nor_off_stops_start_up():
    result = settings_value("maybe")

    assert result.returncode != 0
    assert "TESS_OPERATOR_MEMORY='maybe' is neither true" in result.stderr


def test_unset_means_on():
    env = {k: v for k, v in os.environ.items() if k != "TESS_OPERATOR_MEMORY"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.TESS_OPERATOR_MEMORY)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "tess_site.settings.test"},
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
        check=False,
    )
    assert result.stdout.strip() == "True"


def test_the_switch_command_turns_memory_off_and_on_for_every_operator(cast, capsys):
    owner, teammate = scope_of(cast.owner, cast.acme), scope_of(cast.teammate, cast.acme)

    call_command("tess_memory_switch", "off")
    off = (memory_scope_for(owner), memory_scope_for(teammate))
    call_command("tess_memory_switch", "on")

    assert off == ("session", "session")
    assert memory_scope_for(owner) == "profile"
    assert "operator memory: on" in capsys.readouterr().out.splitlines()[-1]


def test_a_superuser_flips_the_switch_in_the_admin(cast, browser_as):
    cast.admin_user.is_superuser = True
    cast.admin_user.save()
    client = browser_as(cast.admin_user)
    token = csrf_token(client)

    response = client.post("/admin/memory_app/memoryswitch/add/", {"csrfmiddlewaretoken": token})

    assert response.status_code == 302
    switch = MemorySwitch.objects.get()
    assert switch.enabled is False and switch.changed_by == "admin:admin_user"
    assert memory_scope_for(scope_of(cast.owner, cast.acme)) == "session"


def test_only_superusers_see_the_switch_in_the_admin(cast, browser_as):
    assert browser_as(cast.admin_user).get("/admin/memory_app/memoryswitch/").status_code == 403
