"""The usage page in a real browser: the chart shows the seeded days, the table the sessions, and the CSV
export holds exactly what the usage API answers."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from sessions_app.usage import usage_record
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_accessibility import assert_accessible
from tests.factories import SessionFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_chart_shows_the_seeded_days_and_the_csv_matches_the_api(cast, open_browser):
    today = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    billing = SessionFactory.create(
        owner=cast.owner, tenant=cast.acme, title="Refactor billing", provider_instance="pi1"
    )
    docs = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="Nightly docs", provider_instance="pi2")
    secret = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="Teammate's spike")
    step = {"model": "sol", "input": 1000, "output": 100, "currency": "USD"}
    for days_ago, cost in ((1, "0.40"), (3, "1.25"), (6, "0.05")):
        at = (today - timedelta(days=days_ago)).isoformat()
        usage_record(session=billing, steps=[{**step, "ref": f"b{days_ago}", "cost": cost, "at": at}])
    usage_record(
        session=docs, steps=[{**step, "ref": "d", "cost": "0.30", "at": (today - timedelta(days=3)).isoformat()}]
    )
    usage_record(session=docs, steps=[{**step, "ref": "u", "model": "local", "at": today.isoformat()}])
    usage_record(session=secret, steps=[{**step, "ref": "s", "cost": "9", "at": today.isoformat()}])

    page = open_browser()
    log_in(page, cast.owner)
    page.locator("#tess-index-links").get_by_role("link", name="Usage").click()
    bars = page.locator("#tess-usage-svg rect.tess-usage-bar")

    def day(n: int) -> str:
        return (today - timedelta(days=n)).date().isoformat()

    def tooltips(count: int) -> list[str]:
        expect(bars).to_have_count(count)
        return sorted(bars.nth(i).locator("title").text_content() or "" for i in range(count))

    # One bar a day for the one operator (the teammate's session is not theirs to see), docs stacked in on day 3.
    assert tooltips(3) == sorted(
        [f"{day(1)} · owner: 0.40 USD", f"{day(3)} · owner: 1.55 USD", f"{day(6)} · owner: 0.05 USD"]
    )
    page.get_by_label("Stack by").select_option("provider")
    page.get_by_role("button", name="Show").click()
    assert tooltips(4) == sorted(
        [
            f"{day(1)} · pi1: 0.40 USD",
            f"{day(3)} · pi1: 1.25 USD",
            f"{day(3)} · pi2: 0.30 USD",
            f"{day(6)} · pi1: 0.05 USD",
        ]
    )
    table = page.locator("#tess-usage-table tbody")
    expect(table).to_contain_text("Refactor billing")
    expect(table).not_to_contain_text("Teammate's spike")
    expect(table.locator("tr").first).to_contain_text("1.7 USD")  # sorted by cost, the largest first

    assert_accessible(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "usage-1280-light.png"), full_page=True)
    with page.expect_download() as download:
        page.locator("#tess-usage-csv").click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    since = (today - timedelta(days=29)).date().isoformat()
    api = page.request.get(f"/api/v1/usage/?group_by=session&since={since}").json()["results"]
    as_csv = {
        (r["session_id"], r["currency"] or None): (r["cost"] or None, int(r["steps"]), int(r["input_tokens"]))
        for r in rows
    }
    as_api = {(r["group"], r["currency"]): (r["cost"], r["steps"], r["input_tokens"]) for r in api}
    assert as_csv == as_api and len(as_csv) == 3  # billing, docs priced, docs unpriced
