"""The dashboard at `/ui/` in headless Chromium against a real server: what a person sees, what the buttons
do to the broker, live counts, deep links and history, the token prompt, and text that holds HTML.

Each page's screenshot is written to build/ui-screenshots/. Chromium is Debian's (`ci/test.sh` installs
it); Playwright drives it as it is, without downloading a browser of its own.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess

CHROMIUM = os.environ.get("BUNQUEUE_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "build" / "ui-screenshots"
TOKEN = "ui-secret"
HOSTILE = '<img src=x onerror="window.__xss=1">'
TIMEOUT_MS = 10_000
# How many points the first line of the throughput chart has.
POINTS = "document.querySelector('figure.chart polyline').getAttribute('points').split(' ').length"

playwright_api = pytest.importorskip("playwright.sync_api")
if shutil.which(CHROMIUM) is None:
    pytest.skip(f"no Chromium at {CHROMIUM} (ci/test.sh installs Debian's chromium)", allow_module_level=True)

expect = playwright_api.expect


class Rest:
    """The broker's REST API, as a test sets things up and checks what the page did."""

    def __init__(self, server: ServerProcess, token: str | None = None) -> None:
        self.base = f"http://127.0.0.1:{server.http_port}"
        self.token = token

    def __call__(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return json.loads(err.read())

    def push(self, queue: str, **job: Any) -> str:
        reply = self("POST", f"/queues/{queue}/jobs", job)
        assert reply["ok"], reply
        return str(reply["id"])

    def pull(self, queue: str) -> str:
        reply = self("GET", f"/queues/{queue}/jobs?timeout=1000")
        assert reply["ok"] and reply["job"], reply
        return str(reply["job"]["id"])


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def rest(server: ServerProcess) -> Rest:
    return Rest(server)


@pytest.fixture(scope="module")
def jobs(rest: Rest) -> dict[str, str]:
    """A broker with something to show: a completed job, a dead-lettered one, waiting and delayed ones, a
    paused queue with limits, and a job whose name and data hold HTML."""
    ids = {"done": rest.push("ui-mail", name="welcome", data={"to": "ada@example.com"}, maxAttempts=1)}
    ids["dead"] = rest.push("ui-mail", name="reminder", data={"to": "bob@example.com"}, maxAttempts=1)
    assert rest.pull("ui-mail") == ids["done"]
    assert rest("POST", f"/jobs/{ids['done']}/ack", {"result": {"sent": True, "messageId": "m-42"}})["ok"]
    assert rest.pull("ui-mail") == ids["dead"]
    assert rest("POST", f"/jobs/{ids['dead']}/fail", {"error": "SMTP 550 mailbox unavailable"})["ok"]
    ids["waiting"] = rest.push("ui-mail", name="digest", data={"n": 1})
    ids["delayed"] = rest.push("ui-mail", name="later", data={}, delay=3_600_000)
    ids["hostile"] = rest.push("ui-html", name=HOSTILE, data={"html": "<script>window.__xss=2</script>"})
    rest.push("ui-paused", name="held", data={})
    assert rest("POST", "/queues/ui-paused/pause")["ok"]
    assert rest("PUT", "/queues/ui-paused/rate-limit", {"limit": 7, "duration": 1000})["ok"]
    assert rest("PUT", "/queues/ui-paused/concurrency", {"concurrency": 3})["ok"]
    assert rest("POST", "/workers", {"name": "mailer-1", "queues": ["ui-mail"], "concurrency": 4})["ok"]
    assert rest("POST", "/crons", {"name": "nightly-digest", "queue": "ui-mail", "schedule": "0 3 * * *"})["ok"]
    return ids


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        # Chromium run as root needs --no-sandbox.
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Page:
    """A browser tab on the server, collecting console errors and uncaught exceptions."""

    def __init__(self, browser: Any, server: ServerProcess, **context: Any) -> None:
        self.base = f"http://127.0.0.1:{server.http_port}"
        self.context = browser.new_context(**context)
        self.tab = self.context.new_page()
        self.tab.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.tab.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        self.tab.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def open(self, path: str) -> Any:
        self.tab.goto(self.base + path)
        return self.tab

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.tab.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def page(browser: Any, server: ServerProcess) -> Iterator[Page]:
    tab = Page(browser, server, viewport={"width": 1280, "height": 900})
    yield tab
    tab.context.close()
    assert tab.errors == []


def queue_row(tab: Any, queue: str) -> Any:
    return tab.locator(f'tr[data-queue="{queue}"]')


def count_cell(tab: Any, queue: str, name: str) -> Any:
    return queue_row(tab, queue).locator(f'td[data-count="{name}"]')


def test_overview_shows_every_queue_with_counts_state_and_limits(page: Page, rest: Rest, jobs: dict[str, str]) -> None:
    tab = page.open("/ui/")
    expect(tab.locator("#live")).to_have_text("live")
    for queue in ("ui-mail", "ui-html", "ui-paused"):
        expect(queue_row(tab, queue).locator("th a")).to_have_text(queue)
    # The broker's own counts, cell by cell.
    counts = rest("GET", "/queues/ui-mail/counts")["counts"]
    assert (counts["waiting"], counts["delayed"], counts["completed"], counts["failed"]) == (1, 1, 1, 1)
    for name in ("waiting", "prioritized", "delayed", "active", "completed", "failed"):
        expect(count_cell(tab, "ui-mail", name)).to_have_text(str(counts[name]))
    expect(count_cell(tab, "ui-mail", "dlq")).to_have_text("1")
    expect(queue_row(tab, "ui-paused").locator('td[data-field="paused"]')).to_have_text("paused")
    expect(queue_row(tab, "ui-mail").locator('td[data-field="paused"]')).to_have_text("running")
    expect(queue_row(tab, "ui-paused").locator('td[data-field="limits"]')).to_have_text(
        "rate 7/1000ms, concurrency 3")
    expect(tab.locator('[data-field="storage"]')).to_have_text("Healthy")
    worker = rest("GET", "/workers")["data"]["workers"][0]
    expect(tab.locator('tr[data-worker="mailer-1"] td')).to_have_text(
        ["mailer-1", "ui-mail", worker["status"], "4", "0", "0", "0", re.compile(r"\d+s ago")])
    cron = rest("GET", "/crons/nightly-digest")["cron"]
    next_run = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(cron["nextRun"] / 1000))
    expect(tab.locator('tr[data-cron="nightly-digest"] td')).to_have_text(
        ["nightly-digest", "ui-mail", "0 3 * * *", next_run, "0"])


def test_the_chart_takes_a_sample_every_five_seconds(page: Page, rest: Rest, jobs: dict[str, str]) -> None:
    # The page's timers run on a clock the test holds, so five seconds pass exactly and at once.
    page.tab.clock.install()
    tab = page.open("/ui/")
    line = tab.locator("figure.chart svg polyline").first
    expect(tab.locator("figure.chart svg polyline")).to_have_count(7)
    # One sample draws a flat line across (two points); each later sample adds a point.
    assert len(line.get_attribute("points").split()) == 2
    tab.clock.pause_at(tab.evaluate("Date.now()") + 10)
    for n in range(40):
        rest.push("ui-busy", name=f"b{n}", data={})
    tab.clock.run_for(5_000)
    tab.wait_for_function(f"() => {POINTS} == 3", polling=50)
    expect(tab.locator("figure.chart").first).to_contain_text("push")
    for _ in range(10):
        rest.pull("ui-busy")
    # While the clock stands still no sample is taken; five seconds more take exactly one.
    tab.wait_for_timeout(300)
    assert tab.evaluate(POINTS) == 3
    tab.clock.run_for(5_000)
    tab.wait_for_function(f"() => {POINTS} == 4", polling=50)
    tab.wait_for_timeout(300)
    assert tab.evaluate(POINTS) == 4
    page.shot("overview")


def test_counts_follow_the_event_stream_without_a_reload(page: Page, rest: Rest, jobs: dict[str, str]) -> None:
    tab = page.open("/ui/")
    expect(tab.locator("#live")).to_have_text("live")
    waiting = count_cell(tab, "ui-mail", "waiting")
    before = int(waiting.inner_text())
    tab.evaluate("window.__sameDocument = true")
    extra = rest.push("ui-mail", name="live-1", data={})
    expect(waiting).to_have_text(str(before + 1))
    assert rest("DELETE", f"/jobs/{extra}")["ok"]
    expect(waiting).to_have_text(str(before))
    # A queue that did not exist when the page loaded appears as its first job arrives.
    rest.push("ui-new", name="first", data={})
    expect(count_cell(tab, "ui-new", "waiting")).to_have_text("1")
    assert rest("POST", "/queues/ui-mail/pause")["ok"]
    expect(queue_row(tab, "ui-mail").locator('td[data-field="paused"]')).to_have_text("paused")
    assert rest("POST", "/queues/ui-mail/resume")["ok"]
    expect(queue_row(tab, "ui-mail").locator('td[data-field="paused"]')).to_have_text("running")
    assert tab.evaluate("window.__sameDocument") is True


def test_queue_page_lists_jobs_by_state_pages_and_searches(page: Page, rest: Rest, jobs: dict[str, str]) -> None:
    for n in range(23):
        rest.push("ui-many", name=f"bulk-{n:02d}", data={"n": n})
    tab = page.open("/ui/queues/ui-mail")
    expect(tab.locator("#view h1")).to_have_text("ui-mail")
    expect(tab.locator(f'tr[data-job="{jobs["waiting"]}"]')).to_contain_text("digest")
    tab.get_by_role("link", name="completed").click()
    expect(tab).to_have_url(page.base + "/ui/queues/ui-mail?state=completed")
    row = tab.locator(f'tr[data-job="{jobs["done"]}"]')
    expect(row).to_contain_text("welcome")
    expect(tab.locator("tbody tr")).to_have_count(1)
    tab.get_by_role("link", name="dlq").click()
    expect(tab.locator(f'tr[data-job="{jobs["dead"]}"]')).to_contain_text("SMTP 550 mailbox unavailable")
    page.shot("queue")

    tab = page.open("/ui/queues/ui-many")
    expect(tab.locator("tbody tr")).to_have_count(20)
    expect(tab.locator("tbody tr").first).to_contain_text("bulk-00")
    tab.get_by_role("link", name="Next →").click()
    expect(tab.locator("tbody tr")).to_have_count(3)
    expect(tab.locator("tbody tr").first).to_contain_text("bulk-20")
    tab.go_back()
    expect(tab.locator("tbody tr")).to_have_count(20)
    tab.fill("#search", "bulk-17")
    tab.press("#search", "Enter")
    expect(tab.locator("tbody tr")).to_have_count(1)
    expect(tab.locator("tbody tr")).to_contain_text("bulk-17")
    tab.fill("#search", jobs["waiting"])
    tab.press("#search", "Enter")
    expect(tab.locator("tbody tr")).to_have_count(0)
    tab = page.open(f"/ui/queues/ui-mail?q={jobs['waiting']}")
    expect(tab.locator("tbody tr")).to_have_count(1)
    expect(tab.locator(f'tr[data-job="{jobs["waiting"]}"]')).to_be_visible()


def test_queue_controls_change_the_broker(page: Page, rest: Rest, jobs: dict[str, str]) -> None:
    dead = rest.push("ui-ctl", name="dies", data={}, maxAttempts=1)
    assert rest.pull("ui-ctl") == dead
    assert rest("POST", f"/jobs/{dead}/fail", {"error": "x"})["ok"]
    done = rest.push("ui-ctl", name="done", data={})
    assert rest.pull("ui-ctl") == done
    assert rest("POST", f"/jobs/{done}/ack", {"result": 1})["ok"]
    for n in range(3):
        rest.push("ui-ctl", name=f"c{n}", data={})
    tab = page.open("/ui/queues/ui-ctl")
    expect(tab.locator('dd[data-count="waiting"]')).to_have_text("3")
    expect(tab.locator("#live")).to_have_text("live")
    # The counts follow the event stream here too.
    extra = rest.push("ui-ctl", name="extra", data={})
    expect(tab.locator('dd[data-count="waiting"]')).to_have_text("4")
    assert rest("DELETE", f"/jobs/{extra}")["ok"]
    expect(tab.locator('dd[data-count="waiting"]')).to_have_text("3")

    tab.get_by_role("button", name="Pause").click()
    expect(tab.get_by_role("button", name="Resume")).to_be_visible()
    assert rest("GET", "/queues/ui-ctl/paused")["paused"] is True
    tab.get_by_role("button", name="Resume").click()
    expect(tab.get_by_role("button", name="Pause")).to_be_visible()
    assert rest("GET", "/queues/ui-ctl/paused")["paused"] is False

    tab.fill("#rate-max", "12")
    tab.fill("#rate-window", "2000")
    tab.get_by_role("button", name="Set").first.click()
    expect(tab.locator(".notice")).to_have_text("Rate limit: done")
    limits = rest("GET", "/queues/ui-ctl/limits")["data"]["limits"]
    assert limits["rateLimit"] == {"max": 12, "duration": 2000}
    tab.fill("#concurrency", "4")
    tab.get_by_role("button", name="Set").nth(1).click()
    expect(tab.locator(".notice")).to_have_text("Concurrency: done")
    assert rest("GET", "/queues/ui-ctl/limits")["data"]["limits"]["concurrencyLimit"] == 4

    # A destructive action asks first; cancelling changes nothing.
    tab.get_by_role("button", name="Drain").click()
    expect(tab.locator("#confirm")).to_be_visible()
    expect(tab.locator("#confirm-text")).to_contain_text('Drain "ui-ctl"?')
    tab.get_by_role("button", name="Cancel").click()
    expect(tab.locator("#confirm")).to_be_hidden()
    assert rest("GET", "/queues/ui-ctl/counts")["counts"]["waiting"] == 3
    tab.get_by_role("button", name="Drain").click()
    tab.get_by_role("button", name="Confirm").click()
    expect(tab.locator('dd[data-count="waiting"]')).to_have_text("0")
    assert rest("GET", "/queues/ui-ctl/counts")["counts"]["waiting"] == 0

    expect(tab.locator('dd[data-count="dlq"]')).to_have_text("1")
    tab.get_by_role("button", name="Retry DLQ").click()
    expect(tab.locator('dd[data-count="dlq"]')).to_have_text("0")
    assert rest("GET", f"/jobs/{dead}/state")["state"] == "waiting"
    assert rest.pull("ui-ctl") == dead
    assert rest("POST", f"/jobs/{dead}/fail", {"error": "x"})["ok"]
    tab.reload()
    expect(tab.locator('dd[data-count="dlq"]')).to_have_text("1")
    tab.get_by_role("button", name="Purge DLQ").click()
    tab.get_by_role("button", name="Confirm").click()
    expect(tab.locator('dd[data-count="dlq"]')).to_have_text("0")
    assert rest("GET", "/queues/ui-ctl/dlq")["total"] == 0

    expect(tab.locator('dd[data-count="completed"]')).to_have_text("1")
    tab.select_option("#clean-state", "completed")
    tab.get_by_role("button", name="Clean", exact=True).click()
    expect(tab.locator("#confirm-text")).to_have_text('Remove every completed job of "ui-ctl"?')
    tab.get_by_role("button", name="Confirm").click()
    expect(tab.locator('dd[data-count="completed"]')).to_have_text("0")
    assert rest("GET", "/queues/ui-ctl/counts")["counts"]["completed"] == 0
    assert rest("GET", f"/jobs/{done}")["ok"] is False


def test_job_page_shows_a_completed_jobs_result_and_a_dead_jobs_failure(page: Page, jobs: dict[str, str]) -> None:
    tab = page.open(f"/ui/jobs/{jobs['done']}")
    expect(tab.locator('[data-field="state"]')).to_have_text("completed")
    assert json.loads(tab.locator('pre[data-field="data"]').inner_text()) == {"to": "ada@example.com"}
    assert json.loads(tab.locator('pre[data-field="result"]').inner_text()) == {"sent": True, "messageId": "m-42"}
    expect(tab.get_by_role("region", name="Timeline").locator("tbody tr")).to_have_count(3)
    page.shot("job-completed")

    tab = page.open(f"/ui/jobs/{jobs['dead']}")
    expect(tab.locator('[data-field="state"]')).to_have_text("failed")
    expect(tab.locator('[data-field="failure"]')).to_have_text("SMTP 550 mailbox unavailable")
    expect(tab.get_by_role("region", name="Failure")).to_contain_text("max_attempts_exceeded")
    expect(tab.locator('[data-field="result"]')).to_have_count(0)
    page.shot("job-failed")


def test_job_actions_change_the_broker(page: Page, rest: Rest) -> None:
    delayed = rest.push("ui-act", name="wait", data={}, delay=3_600_000)
    tab = page.open(f"/ui/jobs/{delayed}")
    expect(tab.locator('[data-field="state"]')).to_have_text("delayed")
    tab.get_by_role("button", name="Promote").click()
    expect(tab.locator('[data-field="state"]')).to_have_text("waiting")
    assert rest("GET", f"/jobs/{delayed}/state")["state"] == "waiting"
    tab.fill("#priority", "9")
    tab.get_by_role("button", name="Change").click()
    expect(tab.locator(".notice")).to_have_text("Priority: done")
    assert rest("GET", f"/jobs/{delayed}")["job"]["priority"] == 9
    tab.get_by_role("button", name="Cancel").click()
    tab.locator("#confirm").get_by_role("button", name="Confirm").click()
    expect(tab.locator(".notice")).to_have_text("Cancel: done")
    expect(tab.locator('[data-field="removed"]')).to_have_text("This job was removed.")
    assert rest("GET", f"/jobs/{delayed}")["ok"] is False

    dead = rest.push("ui-act", name="dies", data={}, maxAttempts=1)
    assert rest.pull("ui-act") == dead
    assert rest("POST", f"/jobs/{dead}/fail", {"error": "broken"})["ok"]
    tab = page.open(f"/ui/jobs/{dead}")
    tab.get_by_role("button", name="Retry").click()
    expect(tab.locator('[data-field="state"]')).to_have_text("waiting")
    assert rest("GET", f"/jobs/{dead}/state")["state"] == "waiting"

    assert rest.pull("ui-act") == dead
    tab.reload()
    expect(tab.locator('[data-field="state"]')).to_have_text("active")
    tab.get_by_role("button", name="Discard").click()
    tab.get_by_role("button", name="Confirm").click()
    expect(tab.locator(".notice")).to_have_text("Discard: done")
    assert rest("GET", f"/jobs/{dead}/state")["state"] == "failed"


def test_a_refresh_already_asked_does_not_draw_over_a_typed_priority(page: Page, rest: Rest) -> None:
    job = rest.push("ui-typed", name="typed", data={})
    assert rest.pull("ui-typed") == job
    tab = page.open(f"/ui/jobs/{job}")
    expect(tab.locator('[data-field="state"]')).to_have_text("active")
    # The refresh an event starts is held on its way to the broker until the operator has typed.
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    tab.route(f"**/jobs/{job}", hold)
    assert rest("POST", f"/jobs/{job}/progress", {"progress": 10})["ok"]
    for _ in range(100):
        if held:
            break
        tab.wait_for_timeout(20)
    assert held, "the progress event asked for no refresh"
    tab.fill("#priority", "7")
    held[0].continue_()
    tab.unroute(f"**/jobs/{job}")
    tab.wait_for_timeout(400)
    assert tab.input_value("#priority") == "7"
    # Once the field lets go, the refresh it held back draws the job as it is now.
    tab.locator("#priority").blur()
    expect(tab.locator("progress")).to_have_attribute("value", "10")
    assert tab.input_value("#priority") == "0"


def test_job_page_shows_progress_logs_parent_and_children(page: Page, rest: Rest, server: ServerProcess) -> None:
    job = rest.push("ui-work", name="import", data={"file": "a.csv"})
    assert rest.pull("ui-work") == job
    assert rest("POST", f"/jobs/{job}/progress", {"progress": 40, "message": "rows read"})["ok"]
    assert rest("POST", f"/jobs/{job}/logs", {"message": "opened a.csv", "level": "info"})["ok"]
    assert rest("POST", f"/jobs/{job}/logs", {"message": "<b>bold</b> is text", "level": "warn"})["ok"]
    tab = page.open(f"/ui/jobs/{job}")
    expect(tab.locator('[data-field="state"]')).to_have_text("active")
    expect(tab.locator("progress")).to_have_attribute("value", "40")
    expect(tab.get_by_role("region", name="Logs").locator("li")).to_have_count(2)
    expect(tab.get_by_role("region", name="Logs").locator("li").nth(1)).to_contain_text("[warn] <b>bold</b> is text")
    # Progress reported while the page is open shows up without a reload.
    assert rest("POST", f"/jobs/{job}/progress", {"progress": 75})["ok"]
    expect(tab.locator("progress")).to_have_attribute("value", "75")

    client = RawClient(server.addr)
    try:
        # A parent and its child as a FlowProducer sends them.
        graph = [{"id": "ui-parent-1", "queue": "ui-flow", "input": {
                     "name": "report", "data": {"__childrenIds": ["ui-child-1"]}, "childrenIds": ["ui-child-1"],
                     "dependsOn": ["ui-child-1"]}},
                 {"id": "ui-child-1", "queue": "ui-flow-parts", "input": {
                     "name": "part", "data": {"__parentId": "ui-parent-1", "__parentQueue": "ui-flow"},
                     "parentId": "ui-parent-1"}}]
        assert client.ok({"cmd": "PUSHF", "jobs": graph})["ok"] is True
    finally:
        client.close()
    assert rest.pull("ui-flow-parts") == "ui-child-1"
    assert rest("POST", "/jobs/ui-child-1/ack", {"result": {"rows": 3}})["ok"]
    tab = page.open("/ui/jobs/ui-parent-1")
    expect(tab.locator('li[data-child="ui-child-1"]')).to_have_text('ui-child-1 → {"rows":3}')
    tab.locator('li[data-child="ui-child-1"] a').click()
    expect(tab).to_have_url(page.base + "/ui/jobs/ui-child-1")
    expect(tab.locator('[data-field="result"]')).to_contain_text('"rows": 3')
    tab.get_by_role("link", name="ui-parent-1").click()
    expect(tab).to_have_url(page.base + "/ui/jobs/ui-parent-1")


def test_links_history_and_deep_links(page: Page, jobs: dict[str, str]) -> None:
    tab = page.open("/ui/")
    tab.evaluate("window.__sameDocument = true")
    queue_row(tab, "ui-mail").locator("th a").click()
    expect(tab).to_have_url(page.base + "/ui/queues/ui-mail")
    tab.get_by_role("link", name="completed").click()
    tab.locator(f'tr[data-job="{jobs["done"]}"] a').click()
    expect(tab).to_have_url(page.base + f"/ui/jobs/{jobs['done']}")
    expect(tab.locator('[data-field="state"]')).to_have_text("completed")
    tab.go_back()
    expect(tab).to_have_url(page.base + "/ui/queues/ui-mail?state=completed")
    expect(tab.locator(f'tr[data-job="{jobs["done"]}"]')).to_be_visible()
    tab.go_back()
    tab.go_back()
    expect(queue_row(tab, "ui-mail")).to_be_visible()
    tab.go_forward()
    expect(tab.locator("#view h1")).to_have_text("ui-mail")
    assert tab.evaluate("window.__sameDocument") is True
    # A reload on a deep link shows the same job.
    tab = page.open(f"/ui/jobs/{jobs['dead']}")
    tab.reload()
    expect(tab.locator('[data-field="failure"]')).to_have_text("SMTP 550 mailbox unavailable")


def test_keyboard_reaches_a_queue_and_opens_it(page: Page, jobs: dict[str, str]) -> None:
    tab = page.open("/ui/")
    expect(queue_row(tab, "ui-mail")).to_be_visible()
    for _ in range(40):
        tab.keyboard.press("Tab")
        if tab.evaluate("document.activeElement.textContent") == "ui-mail":
            break
    tab.keyboard.press("Enter")
    expect(tab).to_have_url(page.base + "/ui/queues/ui-mail")
    expect(tab.locator("#view h1")).to_have_text("ui-mail")


def test_html_in_names_and_data_is_shown_as_text(page: Page, jobs: dict[str, str]) -> None:
    tab = page.open("/ui/queues/ui-html")
    row = tab.locator(f'tr[data-job="{jobs["hostile"]}"]')
    expect(row.locator("td").nth(1)).to_have_text(HOSTILE)
    assert tab.locator("main img").count() == 0
    tab = page.open(f"/ui/jobs/{jobs['hostile']}")
    expect(tab.get_by_text(HOSTILE, exact=True)).to_be_visible()
    assert json.loads(tab.locator('pre[data-field="data"]').inner_text()) == {
        "html": "<script>window.__xss=2</script>"}
    assert tab.locator("main img, main script").count() == 0
    assert tab.evaluate("window.__xss") is None


def test_a_phone_sees_the_page_without_sideways_scrolling(browser: Any, server: ServerProcess,
                                                          jobs: dict[str, str]) -> None:
    phone = Page(browser, server, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        tab = phone.open("/ui/")
        expect(queue_row(tab, "ui-mail")).to_be_visible()
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        phone.shot("overview-phone")
        tab = phone.open(f"/ui/jobs/{jobs['done']}")
        expect(tab.locator('[data-field="state"]')).to_have_text("completed")
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        phone.context.close()
    assert phone.errors == []


def test_with_auth_nothing_shows_without_the_token(browser: Any) -> None:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000", "AUTH_TOKENS": TOKEN}).start()
    try:
        rest = Rest(proc, TOKEN)
        rest.push("ui-secret-queue", name="hidden", data={})
        page = Page(browser, proc, viewport={"width": 1280, "height": 900})
        tab = page.open("/ui/")
        expect(tab.get_by_role("heading", name="Token required")).to_be_visible()
        expect(tab.locator("#view")).to_be_hidden()
        assert "ui-secret-queue" not in tab.content()
        page.shot("token-prompt")
        # A wrong token is refused (the browser reports the 401), and the prompt stays.
        tab.fill("#token", "wrong")
        tab.press("#token", "Enter")
        expect(tab.locator("#token-error")).to_have_text("The token was refused.")
        assert "ui-secret-queue" not in tab.content()
        assert [e for e in page.errors if "401" not in e] == []
        page.errors.clear()
        tab.fill("#token", TOKEN)
        tab.get_by_role("button", name="Open dashboard").click()
        expect(count_cell(tab, "ui-secret-queue", "waiting")).to_have_text("1")
        # The event stream carries the token too: counts still follow it.
        expect(tab.locator("#live")).to_have_text("live")
        rest.push("ui-secret-queue", name="hidden-2", data={})
        expect(count_cell(tab, "ui-secret-queue", "waiting")).to_have_text("2")
        # Kept for the tab: a reload needs no new prompt; forgetting it hides everything again.
        tab.reload()
        expect(count_cell(tab, "ui-secret-queue", "waiting")).to_have_text("2")
        tab.get_by_role("button", name="Forget token").click()
        expect(tab.get_by_role("heading", name="Token required")).to_be_visible()
        assert "ui-secret-queue" not in tab.content()
        assert tab.evaluate("sessionStorage.length") == 0
        page.context.close()
        assert page.errors == []
    finally:
        proc.stop()
