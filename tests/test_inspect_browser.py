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
        message = page.locator("#message")
        assert message.get_attribute("class") == "error"
        assert message.inner_text() == ("SensePolicyError: action 'launch' requires capability "
                                        "'rockets.launch', which is denied by policy")
        assert page.locator("#audit-tree li.record[data-event='denied'][data-name='launch']"
                            ).count() == 1
        # Wrong arity: the VM's own error, nothing prepared.
        row.locator("input.args").fill("")
        row.locator("button.prepare").click()
        page.wait_for_function(
            "document.getElementById('message').textContent.includes('expects 1 argument')")
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
        message = page.locator("#message")
        message.wait_for(state="visible")
        page.wait_for_function(
            "document.getElementById('message').textContent.includes('token')")
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
