"""``sensevm inspect`` end to end in headless Chromium (Debian's ``chromium``, driven by Playwright).

Skips, saying why, when either is missing: ``.ci/run`` installs chromium and ``make test``
installs Playwright (the ``test`` extra); Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import ROOT

CHROMIUM = os.environ.get("SENSE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
    pytest.skip("no chromium executable (apt-get install -y chromium)", allow_module_level=True)
try:
    from playwright.sync_api import sync_playwright
except ImportError:
    pytest.skip("Playwright for Python is not installed (pip install playwright)",
                allow_module_level=True)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT = 20_000      # ms, per wait: the machine is shared

PROGRAM = '''\
tool lookup(word: String) returns String requires dict.read "define a word":
    return word + ": a definition"

irreversible action send_mail(to: String, body: String) requires email.send:
    print("sending to " + to)
    lookup(body)

irreversible action launch(code: String) requires rockets.launch:
    print("launched", code)

policy:
    deny rockets.launch

agent courier:
    m = send_mail("ann@team.example", "from the agent")
    m.verify()
    m.commit()

start(courier)
'''


def start_console(path, *extra):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "sensevm", "inspect", path, "--port", "0",
                             *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        m = re.search(r"http://\S+/\?token=\S+", line)
        if m:
            return proc, m.group(0)
    proc.wait(10)
    raise AssertionError(f"the console printed no URL: {proc.stderr.read()}")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@pytest.fixture
def browser(tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    try:
        with sync_playwright() as pw:
            try:
                context = pw.chromium.launch_persistent_context(
                    str(profile), executable_path=CHROMIUM, headless=True, args=ARGS)
            except Exception as exc:        # e.g. a chromium that cannot start here
                pytest.skip(f"chromium could not be started by Playwright: {exc}")
            context.set_default_timeout(TIMEOUT)
            try:
                yield context
            finally:
                context.close()
    except RuntimeError as exc:
        pytest.skip(f"Playwright could not run: {exc}")


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "prog.sns"
    path.write_text(PROGRAM, encoding="utf-8")
    return str(path)


def test_prepare_verify_commit_in_the_page(browser, program):
    proc, url = start_console(program)
    try:
        page = browser.new_page()
        page.goto(url)
        row = page.locator("tr.decl[data-name='send_mail']")
        row.locator("input.args").fill('"bob@example.com", "hello"')
        row.locator("button.prepare").click()
        prepared = page.locator("tr.prepared[data-id='2']")
        prepared.wait_for()
        assert prepared.locator(".state").inner_text() == "prepared"
        assert prepared.locator("td").nth(2).inner_text() == '"bob@example.com", "hello"'

        prepared.locator("button[data-step='verify']").click()
        page.locator("tr.prepared[data-id='2'][data-state='verified']").wait_for()
        prepared.locator("button[data-step='commit']").click()
        page.locator("tr.prepared[data-id='2'][data-state='committed']").wait_for()
        assert page.locator("tr.prepared[data-id='2'] .state").inner_text() == "committed"
        assert "sending to bob@example.com" in page.locator("#output").inner_text()
        assert "state committed" in page.locator("#message").inner_text()

        # The audit tree: the agent's commit sits under agent:courier, its tool call one level
        # deeper; the console's own records are at the top level, marked as the console's.
        agent = page.locator("#audit-tree li.frame[data-tag='agent:courier']")
        assert agent.count() == 1
        assert agent.locator(":scope > ul > li.record[data-event='committed']").count() == 1
        inner = agent.locator(":scope > ul > li.frame[data-tag='irreversible:send_mail']")
        assert inner.locator("li.record[data-event='called']").count() == 1
        top = page.locator("#audit-tree > ul > li.record[data-name='send_mail']")
        assert top.last.get_attribute("data-event") == "committed"
        assert top.last.locator(".tag.console").count() == 1

        # The page shows no DRY RUN badge outside a dry run.
        assert not page.locator("#dry-run-badge").is_visible()
    finally:
        stop(proc)


def test_policy_denial_shown_as_the_vms_error(browser, program):
    proc, url = start_console(program)
    try:
        page = browser.new_page()
        page.goto(url)
        row = page.locator("tr.decl[data-name='launch']")
        row.locator("input.args").fill('"red"')
        row.locator("button.prepare").click()
        prepared = page.locator("tr.prepared[data-id='2']")
        prepared.locator("button[data-step='verify']").click()
        page.locator("tr.prepared[data-id='2'][data-state='denied']").wait_for()
        # A refused request: the VM's error in the alert, the success message gone.
        alert = page.get_by_role("alert")
        assert alert.is_visible() and alert.get_attribute("id") == "error"
        assert alert.inner_text() == ("SensePolicyError: action 'launch' requires capability "
                                      "'rockets.launch', which is denied by policy")
        assert not page.locator("#message").is_visible()
        assert page.locator("#audit-tree li.record[data-event='denied'][data-name='launch']"
                            ).count() == 1
        # Wrong arity: the VM's own error, nothing prepared.
        row.locator("input.args").fill("")
        row.locator("button.prepare").click()
        page.wait_for_function(
            "document.getElementById('error').textContent.includes('expects 1 argument')")
        assert page.locator("tr.prepared").count() == 2
    finally:
        stop(proc)


def test_dry_run_badge_and_skipped_body(browser):
    proc, url = start_console(os.path.join(ROOT, "examples", "dry_run.sns"), "--dry-run")
    try:
        page = browser.new_page()
        page.goto(url)
        badge = page.locator("#dry-run-badge")
        badge.wait_for(state="visible")
        assert badge.inner_text() == "DRY RUN"
        row = page.locator("tr.decl[data-name='withdraw']")
        row.wait_for()
        before = page.locator("tr.prepared").count()
        row.locator("input.args").fill("5")
        row.locator("button.prepare").click()
        page.locator("tr.prepared").nth(before).wait_for()
        ident = page.locator("tr.prepared").nth(before).get_attribute("data-id")
        assert ident == str(before + 1)
        page.locator(f"tr.prepared[data-id='{ident}'] button[data-step='verify']").click()
        page.locator(f"tr.prepared[data-id='{ident}'][data-state='verified']").wait_for()
        page.locator(f"tr.prepared[data-id='{ident}'] button[data-step='commit']").click()
        page.locator(f"tr.prepared[data-id='{ident}'][data-state='committed']").wait_for()
        assert page.locator("#output").inner_text() == ""          # the body did not run
        last = page.locator("#audit-tree li.record").last
        assert "dry run — body not executed" in last.inner_text()
        # Still visible after scrolling to the bottom: the header is sticky.
        page.mouse.wheel(0, 5000)
        assert badge.is_visible()
        box = badge.bounding_box()
        assert box is not None and 0 <= box["y"] < page.viewport_size["height"]
    finally:
        stop(proc)


def test_page_without_token_drives_nothing(browser, program):
    proc, url = start_console(program)
    try:
        bare = url.split("?", 1)[0]
        page = browser.new_page()
        page.goto(bare)
        alert = page.get_by_role("alert")
        alert.wait_for(state="visible")
        assert "needs the token" in alert.inner_text()
        assert not page.locator("#loading").is_visible()
        assert page.locator("tr.decl").count() == 0            # no data, nothing to click
        # Calls made from the page itself are refused ...
        statuses = page.evaluate("""async () => {
            const out = [];
            for (const [m, p] of [["POST", "/api/actions/0/prepare"],
                                  ["POST", "/api/prepared/1/commit"],
                                  ["GET", "/api/state"]]) {
                const r = await fetch(p, {method: m, headers: {"Content-Type": "application/json",
                                      "X-Sense-Token": "guess"}, body: m === "POST" ? "{}" : undefined});
                out.push(r.status);
            }
            return out;
        }""")
        assert statuses == [403, 403, 403]
        # ... and nothing changed: the token-bearing page sees only the agent's action.
        page.goto(url)
        page.locator("tr.prepared").first.wait_for()
        assert page.locator("tr.prepared").count() == 1
        assert page.locator("#audit-tree li.record[data-event='prepared']").count() == 1
    finally:
        stop(proc)


# ----------------------------------------------------------------------------- paused agents

ASKING = '''\
import std.time

trusted tool address_of(name: String) returns String "an address book that takes its time":
    time.sleep(SLOW)
    return name + "@team.example"

irreversible action send_mail(to: String) requires email.send:
    print("sending to " + to)

agent clerk:
    who = ask_human("to whom?")
    m = send_mail(address_of(who))
    m.verify()
    m.commit()
    more = ask_human("anything else?")
    print("clerk: " + more)

start(clerk)
'''


def asking(tmp_path, slow):
    path = tmp_path / "asking.sns"
    path.write_text(ASKING.replace("SLOW", str(slow)), encoding="utf-8")
    return str(path)


def test_answer_a_paused_agent_in_the_page(browser, tmp_path):
    proc, url = start_console(asking(tmp_path, 3))
    try:
        page = browser.new_page()
        page.goto(url)
        card = page.locator(".paused-agent[data-name='clerk']")
        assert card.locator(".question-text").inner_text() == "to whom?"
        assert card.locator(".status").inner_text() == "paused"
        card.get_by_label("answer to agent clerk").fill("ann")
        card.locator("button.answer").click()
        # While the agent runs (its tool sleeps), the page says it is working and nothing
        # can be clicked.
        busy = page.locator("#busy")
        busy.wait_for(state="visible")
        assert busy.inner_text() == "working…"
        assert card.locator("button.answer").is_disabled()
        assert page.locator("tr.decl button.prepare").first.is_disabled()
        assert page.locator("#refresh").is_disabled()
        assert page.locator("body").get_attribute("aria-busy") == "true"
        busy.wait_for(state="hidden")
        # Then: what the answer did, and the agent's next question.
        card.locator(".question-text", has_text="anything else?").wait_for()
        done = card.locator("ol.answers > li[data-question='1']")
        assert done.locator(".answer-text").inner_text() == "ann"
        assert done.locator(".agent-output").text_content() == "sending to ann@team.example\n"
        assert done.locator(".agent-records li[data-event='committed']").count() == 1
        assert done.locator(".after .state").inner_text() == "paused"
        assert "sending to ann@team.example" in page.locator("#output").inner_text()
        assert "answered agent clerk: now paused, asking: anything else?" in \
            page.locator("#message").inner_text()
        assert page.locator("tr.prepared[data-id='1'][data-state='committed']").count() == 1
        agent = page.locator("#audit-tree li.frame[data-tag='agent:clerk']")
        assert agent.locator("li.record[data-event='committed']").count() == 1
        assert not card.locator("button.answer").is_disabled()
        assert not page.get_by_role("alert").is_visible()
        # The last answer: the agent completes and asks nothing more.
        card.get_by_label("answer to agent clerk").fill("no")
        card.get_by_label("answer to agent clerk").press("Enter")
        page.locator(".paused-agent[data-name='clerk'][data-status='completed']").wait_for()
        assert card.locator("input.answer").count() == 0
        assert card.locator("ol.answers > li[data-question='2'] .agent-output").text_content() \
            == "clerk: no\n"
        assert page.locator("tr.agent[data-name='clerk'] .status").inner_text() == "completed"
    finally:
        stop(proc)


def test_the_page_shows_loading_until_the_state_arrives(browser, tmp_path):
    proc, url = start_console(asking(tmp_path, 0))
    try:
        page = browser.new_page()
        held = []
        page.route("**/api/state*", lambda route: held.append(route))
        page.goto(url)
        for _ in range(200):                # the request is held, unanswered, from here on
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the page asked for no state"
        loading = page.locator("#loading")
        assert loading.is_visible() and loading.inner_text() == "Loading the console…"
        assert loading.get_attribute("role") == "status"
        assert not page.locator("main").is_visible()
        assert page.locator("#refresh").is_disabled()
        for route in held:
            route.continue_()
        page.unroute("**/api/state*")
        page.locator(".paused-agent[data-name='clerk']").wait_for()
        assert not loading.is_visible()
        assert page.locator("main").is_visible() and not page.locator("#refresh").is_disabled()
    finally:
        stop(proc)


def test_a_refused_answer_is_shown_and_the_page_stays_usable(browser, tmp_path):
    proc, url = start_console(asking(tmp_path, 0))
    try:
        first, second = browser.new_page(), browser.new_page()
        first.goto(url)
        second.goto(url)
        for page in (first, second):
            page.locator(".paused-agent[data-name='clerk'] .question-text").wait_for()
        # The first page answers; the second still shows the question and answers it too.
        first.get_by_label("answer to agent clerk").fill("ann")
        first.locator(".paused-agent button.answer").click()
        first.locator(".question-text", has_text="anything else?").wait_for()
        second.get_by_label("answer to agent clerk").fill("bob")
        second.locator(".paused-agent button.answer").click()
        alert = second.get_by_role("alert")
        alert.wait_for(state="visible")
        assert alert.inner_text() == ("AlreadyAnswered: agent 'clerk' was already answered "
                                      "(question 1, \"to whom?\"): it now asks question 2: "
                                      "\"anything else?\"")
        # Still usable: it shows the agent as it is now, and answering that works.
        second.locator(".question-text", has_text="anything else?").wait_for()
        button = second.locator(".paused-agent button.answer")
        assert not button.is_disabled() and not second.locator("#busy").is_visible()
        assert second.locator("ol.answers .answer-text").all_inner_texts() == ["ann"]
        second.get_by_label("answer to agent clerk").fill("that's all")
        button.click()
        second.locator(".paused-agent[data-status='completed']").wait_for()
        assert not alert.is_visible()
        assert "clerk: that's all" in second.locator("#output").inner_text()
        assert "bob" not in second.locator("#output").inner_text()
    finally:
        stop(proc)


def test_the_page_says_when_the_console_is_gone(browser, tmp_path):
    proc, url = start_console(asking(tmp_path, 0))
    try:
        page = browser.new_page()
        page.goto(url)
        page.locator(".paused-agent[data-name='clerk']").wait_for()
        assert not page.locator("#unreachable").is_visible()
        proc.kill()
        proc.wait(15)
        # Noticed without a click (the page asks every few seconds) ...
        alert = page.get_by_role("alert")
        alert.wait_for(state="visible")
        assert alert.inner_text().startswith("Console unreachable: the `sensevm inspect` "
                                             "server does not answer")
        assert page.locator("#unreachable").inner_text() == "console unreachable"
        # ... and a request made now says the same, and leaves the page usable.
        page.get_by_label("answer to agent clerk").fill("ann")
        page.locator(".paused-agent button.answer").click()
        page.wait_for_function("document.body.getAttribute('aria-busy') === 'false'")
        assert alert.inner_text().startswith("Console unreachable")
        assert not page.locator(".paused-agent button.answer").is_disabled()
        assert not page.locator("#busy").is_visible()
    finally:
        stop(proc)
