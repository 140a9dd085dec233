"""The guard of tests/outside_transaction.py fails a test for a call inside a transaction, and only then."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import transaction

from tess_site.accounts.models import Tenant
from tests.outside_transaction import no_call_in_transaction
from tests.providers_app.chat_standin import running_chat_standin

pytestmark = pytest.mark.django_db


def test_http_and_subprocesses_outside_a_transaction_pass():
    with running_chat_standin() as standin, no_call_in_transaction() as guard:
        httpx.post(f"{standin.base_url}/chat/completions", json={"model": "m", "messages": []})
        subprocess.run(["true"], check=True)
        with transaction.atomic():
            Tenant.objects.count()  # the database itself is what a transaction is for
    assert guard.violations == []


def test_an_http_request_inside_a_transaction_fails_the_test():
    with (
        running_chat_standin() as standin,
        pytest.raises(pytest.fail.Exception, match="inside a transaction"),
        no_call_in_transaction(),
        transaction.atomic(),
    ):
        httpx.post(f"{standin.base_url}/chat/completions", json={"model": "m", "messages": []})


def test_a_subprocess_inside_a_transaction_fails_the_test():
    with pytest.raises(pytest.fail.Exception, match="subprocess"), no_call_in_transaction(), transaction.atomic():
        subprocess.run(["true"], check=True)


def test_work_handed_to_a_thread_pool_counts_as_inside_the_submitters_transaction():
    with (
        pytest.raises(pytest.fail.Exception, match="subprocess"),
        no_call_in_transaction(),
        transaction.atomic(),
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        pool.submit(subprocess.run, ["true"], check=True).result()
