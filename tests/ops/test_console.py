"""The live console in a real browser (headless Chromium from Debian, driven by Playwright) against
a real `weir up`: a broker killed, its replicas leave the ISR on the page; started again, they
return. WEIR_CONSOLE_SCREENSHOT=docs/console-broker-down.png keeps the page with the broker down."""

import os
import shutil

import pytest
from lab import Up
from playwright.sync_api import sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root, with no network beyond this machine: no sandbox, no background traffic.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 60_000


@pytest.fixture
def up(tmp_path):
    running = Up(tmp_path / "data", "--no-restart")
    yield running
    if running.proc.poll() is None:
        running.stop()


@pytest.fixture
def page():
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def partition_rows(page, topic: str) -> list[dict]:
    return page.eval_on_selector_all(
        f'tr[data-partition^="{topic}-"]',
        "rows => rows.map(r => ({name: r.dataset.partition, status: r.dataset.status, isr: r.dataset.isr,"
        " down: [...r.querySelectorAll('.replica.down')].map(s => s.dataset.replica)}))")


def test_the_console_shows_a_killed_broker_leave_the_isr_and_come_back(up, page, tmp_path):
    up.filled_topic("shown", 90)
    assert up.said(f"console on http://127.0.0.1:{up.console_port}/")

    page.goto(f"http://127.0.0.1:{up.console_port}/")
    page.wait_for_function("document.querySelectorAll('tr[data-partition^=\"shown-\"][data-status=ok]').length == 3"
                           " && document.querySelectorAll('tr[data-partition^=\"shown-\"] .replica.in-isr').length == 9"
                           " && [...document.querySelectorAll('tr[data-partition^=\"shown-\"] .replica')]"
                           ".every(s => s.textContent.includes('LEO 30'))", timeout=WAIT_MS)

    up.lab("kill", "--broker", "1")
    page.wait_for_selector('tr[data-broker="1"][data-alive="false"]', timeout=WAIT_MS)
    page.wait_for_function(
        "[...document.querySelectorAll('tr[data-partition^=\"shown-\"]')].every(r =>"
        " r.dataset.status === 'under-replicated' && !r.dataset.isr.split(',').includes('1'))", timeout=WAIT_MS)
    rows = partition_rows(page, "shown")
    assert [r["down"] for r in rows] == [["1"], ["1"], ["1"]]
    assert "ISR shrinks" in page.inner_text("#timeline")
    page.screenshot(path=os.environ.get("WEIR_CONSOLE_SCREENSHOT", str(tmp_path / "console.png")), full_page=True)

    up.lab("start", "--broker", "1")
    page.wait_for_selector('tr[data-broker="1"][data-alive="true"]', timeout=WAIT_MS)
    page.wait_for_function(
        "[...document.querySelectorAll('tr[data-partition^=\"shown-\"]')].every(r =>"
        " r.dataset.status === 'ok' && r.dataset.isr.split(',').includes('1'))", timeout=WAIT_MS)
    assert "ISR expands" in page.inner_text("#timeline")
    assert not [r for r in partition_rows(page, "shown") if r["down"]]
