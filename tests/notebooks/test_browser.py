"""Every notebook run in a real browser: JupyterLab as `make lab` starts it, driven in headless Chromium.

Per notebook: open `/lab/tree/NAME.ipynb?reset`, Edit > Clear Outputs of All Cells, Run > Run All
Cells, wait until every code cell has an execution count and the kernel is idle; then no error
output, every widget rendered (no "Error displaying widget", no raw `HBox(`/`VBox(` text, a widget
wherever the committed notebook shows one), and no error in the kernel's messages: an exception in
a widget callback never reaches the page, only the log console, so the test reads the kernel's
websocket frames. Then the widgets must still respond after Run All: the memory inspector (choose a
user, filter, open a key's history, stage an edit, Confirm), the budget explorer (the chart
redraws when the slider moves), the user switcher (it shows the chosen user's data) and the
proposals panel (Approve and Reject decide the proposals the notebook left waiting).

The browser is Debian's `chromium` driven by Playwright from PyPI (`playwright install` cannot
download a browser here). Without a Chromium the module is skipped with a reason; `make test` says
so too, and `.ci/run` installs it. Screenshots go to tests/screenshots/ (ignored by git). The
notebooks run in a temporary copy, so the repository's files are never rewritten.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SCREENSHOTS = ROOT / "tests" / "screenshots"


def find_chromium() -> str | None:
    """Debian's chromium (or one on PATH), or None."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("BROWSER TEST SKIPPED: no Chromium at /usr/bin/chromium or on PATH; install Debian's "
                "(apt-get install chromium) to run tests/notebooks/test_browser.py", allow_module_level=True)
try:
    from playwright.sync_api import Browser, Locator, Page, sync_playwright
    from playwright.sync_api import Error as PlaywrightError
except ImportError:  # pragma: no cover - depends on the installation
    pytest.skip("BROWSER TEST SKIPPED: playwright is not installed (pip install -e '.[dev]')",
                allow_module_level=True)

# Headless, and none of Chromium's own connections (this machine's network is closed to them).
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "memkit-browser-test"
RUN_ALL_TIMEOUT_S = 300
RESPONSE_TIMEOUT_S = 15
"""How long a widget has to show the result of one action (a budget rerun takes a few seconds)."""
DEAD_WIDGET_TIMEOUT_S = 2
"""The same, once the kernel has reported an error from this widget's callbacks (it is known dead)."""

# Which notebook (by number) holds which widget; the check fails if the widget is missing.
WIDGET_CHECKS = {"04": "budget explorer", "06": "user switcher", "08": "inspector", "10": "proposals panel",
                 "11": "question view"}


# -- the server -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Lab:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        """End every session and its kernel, so one notebook's kernel does not outlive its page."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab started as `make lab` does, on a temporary copy of notebooks/, plus headless flags."""
    home = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", home / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "memkit-workspace"))
    # Settings and workspaces of this run only; and no news or update check (they go to the internet).
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    port = free_port()
    command = [str(Path(sys.executable).with_name("jupyter")), "lab",
               *(["--allow-root"] if os.geteuid() == 0 else []), str(home / "notebooks"),
               "--no-browser", f"--ServerApp.token={TOKEN}", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               "--ServerApp.port_retries=0"]
    log = home / "jupyterlab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home,
                                   start_new_session=True)
    server = Lab(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                server.api("GET", "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer within 90 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


# -- the kernel's messages --------------------------------------------------------------------------


def decode_frame(payload: str | bytes) -> dict[str, Any]:
    """One kernel websocket frame as a message: JSON text, or jupyter_server's binary v1 protocol.

    v1: a little-endian uint64 count n, n uint64 offsets; the parts between offsets are the channel
    name, then header, parent header, metadata, content (JSON), then any binary buffers.
    """
    if isinstance(payload, str):
        message: dict[str, Any] = json.loads(payload)
        return message
    count = int.from_bytes(payload[:8], "little")
    offsets = [int.from_bytes(payload[8 + 8 * i:16 + 8 * i], "little") for i in range(count)] + [len(payload)]
    parts = [payload[offsets[i]:offsets[i + 1]] for i in range(count)]
    message = {"channel": parts[0].decode()}
    # A frame with fewer than the five parts raises (ValueError): the caller counts it as undecoded.
    for name, part in zip(("header", "parent_header", "metadata", "content"), parts[1:5], strict=True):
        message[name] = json.loads(part)
    return message


# ipywidgets' frontend first asks for a "control" comm that ipykernel does not have; it falls back
# at once. The maintainers call the two lines harmless (jupyter-widgets/ipywidgets#3525).
NO_CONTROL_COMM = "No such comm target registered: jupyter.widget.control"


class KernelLog:
    """What the kernel published on iopub, as the page received it (the log console's source)."""

    def __init__(self, page: Page) -> None:
        self.messages: list[dict[str, Any]] = []
        self.undecoded = 0
        page.on("websocket", self._attach)

    def _attach(self, socket_: Any) -> None:
        if "/api/kernels/" in socket_.url:
            socket_.on("framereceived", self._frame)

    def _frame(self, payload: str | bytes) -> None:
        try:
            message = decode_frame(payload)
        except (ValueError, UnicodeDecodeError, IndexError):
            self.undecoded += 1
            return
        if message.get("channel") == "iopub":
            self.messages.append(message)

    def mark(self) -> int:
        return len(self.messages)

    def problems(self, since: int = 0) -> list[str]:
        """Errors and stderr text the kernel published since `mark()` was `since`, with their origin."""
        refused_comms = {m["content"].get("comm_id") for m in self.messages
                         if m["header"]["msg_type"] == "comm_close"
                         and m["parent_header"].get("msg_type") == "comm_open"}
        found: list[str] = []
        for message in self.messages[since:]:
            kind, content = message["header"]["msg_type"], message["content"]
            origin = message["parent_header"].get("msg_type", "?")
            where = "in a cell" if origin == "execute_request" else f"in a widget callback ({origin}; log console only)"
            if kind == "error":
                found.append(f"kernel error {where}: {content.get('ename')}: {content.get('evalue')}")
            elif kind == "stream" and content.get("name") == "stderr":
                lines = [line for line in content.get("text", "").splitlines() if line.strip()
                         and line.strip() != NO_CONTROL_COMM
                         and not any(line.strip() == f"No such comm: {comm}" for comm in refused_comms)]
                if lines:
                    found.append(f"kernel stderr {where}: " + " | ".join(lines)[:600])
        counted = {problem: found.count(problem) for problem in found}
        return [problem if n == 1 else f"{problem} (x{n})" for problem, n in counted.items()]

    def callback_failed(self, since: int = 0) -> bool:
        """Whether a widget callback raised since `since` (its errors carry a comm message as parent)."""
        return any(m["header"]["msg_type"] == "error" and m["parent_header"].get("msg_type") == "comm_msg"
                   for m in self.messages[since:])


# -- driving JupyterLab -----------------------------------------------------------------------------


def menu(page: Page, top: str, item: str) -> None:
    page.get_by_role("menuitem", name=top, exact=True).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)


def kernel_idle(page: Page) -> bool:
    status = page.locator("#jp-main-statusbar").text_content() or ""
    return "| Idle" in status


CELLS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')]
  .map((cell, index) => {
    const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')];
    return {
      index, code: cell.classList.contains('jp-CodeCell'),
      prompt: (cell.querySelector('.jp-InputPrompt')?.textContent || '').trim(),
      source: (cell.querySelector('.jp-InputArea-editor')?.textContent || '').trim().split('\\n')[0].slice(0, 80),
      stderr: [...cell.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]')]
        .map(e => e.textContent.trim().slice(0, 400)),
      text: outputs.map(o => o.textContent).join('\\n'),
      widgets: cell.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length,
    };
  })"""


@dataclasses.dataclass
class OpenNotebook:
    name: str
    page: Page
    log: KernelLog
    problems: list[str] = dataclasses.field(default_factory=list)
    """What went wrong in Run All (empty when it ran clean)."""

    def screenshot(self, suffix: str = "") -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{Path(self.name).stem}{suffix}.png"))


def stored_widget_cells(path: Path) -> set[int]:
    """Cells whose committed outputs show a widget."""
    cells = json.loads(path.read_text())["cells"]
    return {i for i, cell in enumerate(cells) for output in cell.get("outputs", [])
            if "application/vnd.jupyter.widget-view+json" in output.get("data", {})}


def open_and_run_all(browser: Browser, lab: Lab, path: Path) -> OpenNotebook:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(20_000)  # an action on a control that is not there fails in 20 s, not 30
    opened = OpenNotebook(path.name, page, KernelLog(page))
    problems = opened.problems
    opening = time.monotonic()
    page.goto(f"{lab.url}/lab/tree/{path.name}?reset&token={TOKEN}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    if not wait_until(lambda: kernel_idle(page), 90):
        problems.append("the kernel was not idle 90 s after opening the notebook")
        return opened
    # The file browser takes a third of the screenshot: fold the left side bar away.
    page.locator(".jp-SideBar.lm-TabBar .lm-TabBar-tab.lm-mod-current").first.click()
    menu(page, "Edit", "Clear Outputs of All Cells")
    menu(page, "Run", "Run All Cells")
    started = time.monotonic()
    load_seconds = started - opening

    def finished() -> bool:
        prompts = [c["prompt"] for c in page.evaluate(CELLS_JS) if c["code"]]
        busy = any("*" in p for p in prompts)
        return not busy and kernel_idle(page) and time.monotonic() - started > 2

    def settled() -> bool:
        # Idle twice, a second apart: between two cells the kernel may look idle for an instant.
        if not finished():
            return False
        page.wait_for_timeout(1000)
        return finished()

    done = wait_until(settled, RUN_ALL_TIMEOUT_S, 0.5)
    seconds = time.monotonic() - started
    cells = page.evaluate(CELLS_JS)
    if not done:
        problems.append(f"Run All had not finished after {RUN_ALL_TIMEOUT_S} s")
    # A cell whose code is folded (an exercise's check) shows no input prompt; outputs were cleared
    # before Run All, so output it has now proves it ran.
    not_run = [c for c in cells if c["code"] and not re.fullmatch(r"\[\d+\]:", c["prompt"])
               and not (c["prompt"] == "" and c["text"].strip())]
    for cell in not_run[:3]:
        problems.append(f"cell {cell['index']} has no execution count ({cell['prompt'] or 'no prompt'}): "
                        f"{cell['source']!r}")
    if len(not_run) > 3:
        problems.append(f"... and {len(not_run) - 3} more cells without an execution count")
    for cell in cells:
        for text in cell["stderr"]:
            problems.append(f"cell {cell['index']} shows an error output: {text[:300]!r}")
        if "Error displaying widget" in cell["text"]:
            problems.append(f"cell {cell['index']} says 'Error displaying widget'")
        raw = re.search(r"\b[HV]Box\(.{0,60}", cell["text"])
        if raw:
            problems.append(f"cell {cell['index']} shows a widget as raw text: {raw.group(0)!r}")
    for index in sorted(stored_widget_cells(path)):
        if index < len(cells) and cells[index]["widgets"] == 0:
            problems.append(f"cell {index} shows no rendered widget (the committed notebook shows one there): "
                            f"{cells[index]['source']!r}")
    problems.extend(opened.log.problems())
    if opened.log.undecoded:
        problems.append(f"{opened.log.undecoded} kernel websocket frames could not be decoded")
    widgets = page.locator(".jp-OutputArea-output:has(.jupyter-widgets)")
    if widgets.count():
        widgets.first.scroll_into_view_if_needed()
    opened.screenshot()
    print(f"\n{path.name}: opened with an idle kernel in {load_seconds:.1f} s, Run All took {seconds:.1f} s "
          f"({sum(c['code'] for c in cells)} code cells), checked in {time.monotonic() - started - seconds:.1f} s")
    return opened


# -- reading widgets --------------------------------------------------------------------------------

# The HTML widget that follows, in page order, the control labelled `label` (ipywidgets draws a
# description as <label class="widget-label">): the inspector's records follow "search", the
# key's history follows "key", the switcher's view follows "user".
HTML_AFTER_JS = r"""(root, label) => {
  const controls = [...root.querySelectorAll('.widget-label')].filter(l => l.textContent.trim() === label);
  if (!controls.length) return null;
  const after = [...root.querySelectorAll('.widget-html-content')]
    .filter(h => controls[0].compareDocumentPosition(h) & Node.DOCUMENT_POSITION_FOLLOWING)
    .filter(h => h.querySelector('table') || h.querySelector('i') || h.querySelector('p'));
  if (!after.length) return null;
  const h = after[0];
  return {text: h.textContent.replace(/\s+/g, ' ').trim(), html: h.innerHTML,
          headers: [...h.querySelectorAll('thead th')].map(th => th.textContent.trim()),
          rows: [...h.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(td => td.textContent.trim()))};
}"""


def html_after(widget: Locator, label: str) -> dict[str, Any]:
    found = widget.evaluate(HTML_AFTER_JS, label)
    return found or {"text": "", "html": "", "headers": [], "rows": []}


def column(table: dict[str, Any], name: str) -> list[str]:
    if name not in table["headers"]:
        return []
    i = table["headers"].index(name)
    return [row[i] for row in table["rows"] if i < len(row)]


def search_shows_only(table: dict[str, Any], query: str) -> bool:
    """Whether the inspector's table shows rows, each matching `query` on its key or value.

    Row by row (column() leaves out the cells a short row lacks, and would pair one row's key with
    another's value): a whole row matches on its key or value; a short row must match on its key
    alone, and one without a key cell matches nothing, so no row passes unchecked.
    """
    if "key" not in table["headers"] or "value" not in table["headers"]:
        return False
    at_key, at_value = table["headers"].index("key"), table["headers"].index("value")

    def matches(row: list[str]) -> bool:
        if at_key >= len(row):
            return False
        text = row[at_key] + (" " + row[at_value] if at_value < len(row) else "")
        return query.casefold() in text.casefold()

    return bool(table["rows"]) and all(matches(row) for row in table["rows"])


def test_the_search_check_checks_short_rows_too() -> None:
    headers = ["kind", "key", "value"]
    whole = [["preference", "drink", "tea"], ["fact", "city", "drink: Paris"]]
    assert search_shows_only({"headers": headers, "rows": whole}, "drink")
    assert not search_shows_only({"headers": headers, "rows": [*whole, ["fact", "city"]]}, "drink")
    assert search_shows_only({"headers": headers, "rows": [*whole, ["fact", "drinks"]]}, "drink")
    assert not search_shows_only({"headers": headers, "rows": [*whole, ["fact"]]}, "drink")
    assert not search_shows_only({"headers": headers, "rows": []}, "drink")


def status_text(widget: Locator) -> str:
    """The inspector's status line (its HTML widget carries the class `memkit-inspector-status`)."""
    return (widget.locator(".memkit-inspector-status").first.text_content() or "").strip()


def labelled(widget: Locator, label: str) -> Locator:
    """The <select> or <input> of the control labelled `label`."""
    hbox = widget.locator(f".widget-inline-hbox:has(> label.widget-label:text-is('{label}'))")
    return hbox.locator("select, input").first


def image_digest(widget: Locator) -> str | None:
    """A digest of the bytes the chart's <img> shows (its blob URL changes even for the same picture)."""
    digest: str | None = widget.locator("img").first.evaluate(
        """async img => { if (!img.src) return null;
                          const bytes = await (await fetch(img.src)).arrayBuffer();
                          const hash = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
                          return [...hash].map(x => x.toString(16).padStart(2, '0')).join(''); }""")
    return digest


class Steps:
    """The steps of one widget check: each failure is recorded with what was seen, and the check goes on."""

    def __init__(self, opened: OpenNotebook, widget: str) -> None:
        self.opened, self.widget = opened, widget
        self.failures: list[str] = []
        self.passed: list[str] = []
        self.since = opened.log.mark()

    def check(self, step: str, ok: bool, seen: str = "") -> bool:
        (self.passed if ok else self.failures).append(step if ok else f"{step}: {seen}")
        return ok

    def wait(self, condition: Callable[[], bool]) -> bool:
        """Wait for a widget to show something; briefly only once its callbacks are known to raise."""
        started = time.monotonic()
        while not condition():
            waited = time.monotonic() - started
            if waited > RESPONSE_TIMEOUT_S or (waited > DEAD_WIDGET_TIMEOUT_S
                                               and self.opened.log.callback_failed(self.since)):
                return False
            time.sleep(0.25)
        return True

    def act(self, action: str, do: Callable[[], Any]) -> bool:
        """Do one thing a person does (click, choose, type); a control that cannot be used is a failure."""
        try:
            do()
        except PlaywrightError as exc:
            self.failures.append(f"could not {action}: {str(exc).splitlines()[0]}")
            return False
        return True

    def finish(self) -> None:
        self.failures.extend(self.opened.log.problems(self.since))
        self.opened.screenshot(f"-{self.widget.replace(' ', '-')}")
        print(f"\n{self.opened.name} {self.widget}: passed {self.passed}; failed {self.failures}")
        assert not self.failures, (f"{self.opened.name}, {self.widget} after Run All:\n  "
                                   + "\n  ".join(self.failures) + f"\n(passed: {', '.join(self.passed) or 'none'})")


def find_widget(opened: OpenNotebook, steps: Steps, selector: str, what: str) -> Locator | None:
    found = opened.page.locator(".jp-OutputArea-output").filter(has=opened.page.locator(selector))
    if not steps.check(f"{what} is on the page", found.count() > 0, "not found after Run All"):
        return None
    widget = found.last
    widget.scroll_into_view_if_needed()
    return widget


# -- the widget checks ------------------------------------------------------------------------------


def check_inspector(opened: OpenNotebook) -> None:
    steps = Steps(opened, "inspector")
    page = opened.page
    widget = find_widget(opened, steps, "button:text-is('Stage edit')", "the memory inspector")
    if widget is None:
        return steps.finish()
    # The user box is a combobox: typing offers the ids (a <datalist>), a whole id selects that user.
    user = labelled(widget, "user")
    users = widget.locator("datalist option").evaluate_all("os => os.map(o => o.value)")
    if not steps.check("it offers at least two users", len(users) >= 2, f"users {users}"):
        return steps.finish()
    steps.check("it says how the database is open", "read-only" in widget.inner_text()
                or "editing" in widget.inner_text(), f"text {widget.inner_text()[:200]!r}")
    # Choose a user: the records table must change to that user's records.
    before = html_after(widget, "search")
    chosen = next(u for u in users if u != user.input_value())
    steps.act(f"type user {chosen!r}", lambda: user.fill(chosen))
    steps.check(f"choosing user {chosen!r} changes the records table",
                steps.wait(lambda: html_after(widget, "search")["html"] != before["html"]),
                f"the table still shows {before['text'][:120]!r}")
    # Filter by kind, with a kind that changes the table: one of two kinds shown, else one not shown.
    kinds = widget.locator(".widget-toggle-buttons:has(> label.widget-label:text-is('kind'))")
    choices = [k for k in kinds.locator("button").all_text_contents() if k.strip() != "all"]
    shown = set(column(html_after(widget, "search"), "kind"))
    kind = sorted(shown)[0] if len(shown) > 1 else next((k for k in choices if k not in shown), "")
    before = html_after(widget, "search")
    if steps.check("the kind filter offers the kinds", bool(kind), f"buttons {choices}, kinds shown {shown}"):
        steps.act(f"press the kind button {kind!r}", kinds.locator(f"button:text-is('{kind}')").click)

        def only_that_kind() -> bool:
            table = html_after(widget, "search")
            return table["html"] != before["html"] and set(column(table, "kind")) <= {kind}

        steps.check(f"the kind filter {kind!r} leaves only {kind!r} records", steps.wait(only_that_kind),
                    f"kinds shown {column(html_after(widget, 'search'), 'kind')}")
        steps.act("press the kind button 'all'", kinds.locator("button:text-is('all')").click)
        steps.check("the kind filter 'all' shows every kind again",
                    steps.wait(lambda: html_after(widget, "search")["rows"] == before["rows"]),
                    f"rows {html_after(widget, 'search')['rows']}")
    # The search box: rows whose key or value contain the text.
    keys = column(html_after(widget, "search"), "key")
    if keys:
        query = keys[0]
        steps.act(f"type {query!r} into search", lambda: labelled(widget, "search").fill(query))

        def searched() -> bool:
            return search_shows_only(html_after(widget, "search"), query)

        steps.check(f"searching {query!r} shows only matching rows", steps.wait(searched),
                    f"rows {html_after(widget, 'search')['rows']}")
    # Open a key's history.
    key = labelled(widget, "key")
    options = [o for o in key.locator("option").evaluate_all("os => os.map(o => o.value)") if o]
    if not steps.check("the key chooser offers the listed keys", bool(options), "no keys to choose"):
        return steps.finish()
    history_before = html_after(widget, "key")
    steps.act(f"choose key {options[0]!r}", lambda: key.select_option(options[0]))

    def history_shown() -> bool:
        table = html_after(widget, "key")
        return bool(table["rows"]) and table["html"] != history_before["html"]

    steps.check(f"choosing key {options[0]!r} shows its history", steps.wait(history_shown),
                f"history shows {html_after(widget, 'key')['text'][:120]!r}")
    revisions = len(html_after(widget, "key")["rows"])
    # Stage an edit: Confirm enables, nothing is written yet.
    new_value = f"set in the browser {int(time.time())}"
    steps.act("type a new value", lambda: labelled(widget, "new value").fill(new_value))
    steps.act("press Stage edit", widget.locator("button:text-is('Stage edit')").click)
    confirm = widget.locator("button:text-is('Confirm')")
    steps.check("Stage edit enables Confirm", steps.wait(confirm.is_enabled),
                f"Confirm stays disabled; status {status_text(widget)!r}")
    steps.check("Stage edit says what is staged", "staged" in status_text(widget) and new_value in status_text(widget),
                f"status {status_text(widget)!r}")
    # Confirm: the table shows the new value, the history gains a revision, Confirm disables again.
    if confirm.is_enabled():
        steps.act("press Confirm", confirm.click)
    steps.check("Confirm writes the value into the records table",
                steps.wait(lambda: new_value in column(html_after(widget, "search"), "value")),
                f"values shown {column(html_after(widget, 'search'), 'value')}")
    steps.check("Confirm adds a revision to the history",
                steps.wait(lambda: len(html_after(widget, "key")["rows"]) == revisions + 1
                           and new_value in html_after(widget, "key")["text"]),
                f"{len(html_after(widget, 'key')['rows'])} revisions shown, {revisions} before")
    steps.check("after Confirm nothing is left staged",
                steps.wait(lambda: not confirm.is_enabled() and "not written yet" not in status_text(widget)),
                f"Confirm enabled {confirm.is_enabled()}; status {status_text(widget)!r}")
    # The deleted keys, listed on request under the records.
    steps.act("open the 'deleted keys' section",
              widget.get_by_text("deleted keys", exact=True).first.click)
    steps.act("tick 'list deleted keys'", widget.get_by_label("list deleted keys").first.check)
    steps.check("the deleted keys are listed (or said to be none)",
                steps.wait(lambda: "no deleted keys" in widget.inner_text() or "deleted_at" in widget.inner_text()),
                f"text {widget.inner_text()[-300:]!r}")
    page.wait_for_timeout(200)
    steps.finish()


def check_budget_explorer(opened: OpenNotebook) -> None:
    steps = Steps(opened, "budget explorer")
    widget = find_widget(opened, steps, ".widget-slider:has(label.widget-label:text-is('budget'))",
                         "the budget explorer")
    if widget is None:
        return steps.finish()
    handle = widget.locator(".widget-slider:has(label.widget-label:text-is('budget')) [role=slider]").first
    summary = widget.locator(".widget-html-content").first
    before_image, before_summary = image_digest(widget), summary.text_content()
    before_value = handle.get_attribute("aria-valuenow")
    # One keypress, one change: Home jumps to the minimum (End when it is there already).
    at_min = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemin")
    steps.act("move the slider with the keyboard", lambda: handle.press("End" if at_min else "Home"))
    steps.check("the slider moved", wait_until(lambda: handle.get_attribute("aria-valuenow") != before_value, 5),
                f"still at {before_value}")
    steps.check("the chart redraws for the new budget",
                steps.wait(lambda: image_digest(widget) != before_image),
                "the image is the same as before the move")
    steps.check("the summary follows the new budget",
                steps.wait(lambda: summary.text_content() != before_summary),
                f"still {before_summary!r}")
    steps.finish()


def check_user_switcher(opened: OpenNotebook) -> None:
    steps = Steps(opened, "user switcher")
    page = opened.page
    widget = find_widget(
        opened, steps, ".widget-dropdown:has(label.widget-label:text-is('user'))", "the user switcher")
    if widget is None:
        return steps.finish()
    user = labelled(widget, "user")
    users = user.locator("option").all_text_contents()
    if not steps.check("it offers at least two users", len(users) >= 2, f"users {users}"):
        return steps.finish()
    first = user.input_value()
    views = {first: html_after(widget, "user")}
    for other in [u for u in users if u != first]:
        steps.act(f"choose {other!r}", functools.partial(user.select_option, other))
        changed = steps.wait(lambda: html_after(widget, "user")["html"] != views[first]["html"])
        views[other] = html_after(widget, "user")
        steps.check(f"choosing {other!r} shows another view than {first!r}'s", changed,
                    f"the dropdown says {user.input_value()!r} but the view is still {first!r}'s: "
                    f"{views[first]['text'][:120]!r}")
    distinct = {json.dumps(view["rows"]) for view in views.values()}
    steps.check("each user's view shows different records", len(distinct) == len(views),
                f"{len(distinct)} distinct tables for {len(views)} users")
    steps.act(f"choose {first!r} again", lambda: user.select_option(first))
    steps.check(f"choosing {first!r} again shows {first!r}'s view again",
                steps.wait(lambda: html_after(widget, "user")["rows"] == views[first]["rows"]),
                f"view {html_after(widget, 'user')['text'][:120]!r}")
    page.wait_for_timeout(200)
    steps.finish()


def check_question_view(opened: OpenNotebook) -> None:
    steps = Steps(opened, "question view")
    widget = find_widget(opened, steps, ".widget-button:has-text('Approve')", "the question view")
    if widget is None:
        return steps.finish()
    shown = widget.text_content() or ""
    steps.check("it shows the server's question with the exact value", 'value: "green tea"' in shown, shown[:200])
    steps.act("press Approve", lambda: widget.locator("button:has-text('Approve')").click())
    # No cell answers this question (test_browser_notebook11.py checks it is still open after Run All).
    steps.check("the result of the answer appears under the buttons",
                steps.wait(lambda: '"stored": true' in (widget.text_content() or "")),
                (widget.text_content() or "")[-200:])
    steps.finish()


def check_proposals_panel(opened: OpenNotebook) -> None:
    steps = Steps(opened, "proposals panel")
    # Found by the panel's class, not by its buttons: deciding the last proposal removes them.
    widget = find_widget(opened, steps, ".memkit-proposals", "the proposals panel")
    if widget is None:
        return steps.finish()
    approve, reject = widget.locator("button:text-is('Approve')"), widget.locator("button:text-is('Reject')")
    waiting = approve.count()
    if not steps.check("it lists at least two waiting proposals", waiting >= 2, f"{waiting} listed"):
        return steps.finish()

    def status() -> str:
        return (widget.locator(".memkit-proposals-status").first.text_content() or "").strip() \
            if widget.locator(".memkit-proposals-status").count() else ""

    steps.act("press Approve on the first proposal", approve.first.click)
    steps.check("Approve applies it and takes it off the list",
                steps.wait(lambda: " approved: " in status() and approve.count() == waiting - 1),
                f"status {status()!r}, {approve.count()} listed")
    steps.act("press Reject on the next proposal", reject.first.click)
    steps.check("Reject takes it off the list, memory untouched",
                steps.wait(lambda: " rejected: " in status() and approve.count() == waiting - 2),
                f"status {status()!r}, {approve.count()} listed")
    opened.page.wait_for_timeout(200)
    steps.finish()


CHECKS = {"inspector": check_inspector, "budget explorer": check_budget_explorer, "user switcher": check_user_switcher,
          "question view": check_question_view,
          "proposals panel": check_proposals_panel}


# -- the tests --------------------------------------------------------------------------------------


def cases() -> list[Any]:
    found = []
    for path in NOTEBOOKS:
        found.append(pytest.param(path, "run all", id=f"{path.stem}-run-all"))
        check = WIDGET_CHECKS.get(path.name[:2])
        if check:
            found.append(pytest.param(path, check, id=f"{path.stem}-{check.replace(' ', '-')}"))
    return found


@pytest.fixture(scope="module")
def notebook_pages(browser: Browser, lab: Lab) -> Iterator[Callable[[Path], OpenNotebook]]:
    """The notebook run all once and kept open for its widget check; the previous one closed first."""
    current: dict[str, OpenNotebook] = {}

    def get(path: Path) -> OpenNotebook:
        if path.name not in current:
            for opened in current.values():
                opened.page.close()
            current.clear()
            lab.shut_down_kernels()
            current[path.name] = open_and_run_all(browser, lab, path)
        return current[path.name]

    yield get
    for opened in current.values():
        opened.page.close()


def test_notebooks_found() -> None:
    assert len(NOTEBOOKS) >= 9 and {p.name[:2] for p in NOTEBOOKS} >= set(WIDGET_CHECKS)


@pytest.mark.parametrize("path, check", cases())
def test_in_the_browser(notebook_pages: Callable[[Path], OpenNotebook], path: Path, check: str) -> None:
    opened = notebook_pages(path)
    if check == "run all":
        assert not opened.problems, f"{path.name} after Run All:\n  " + "\n  ".join(opened.problems)
    else:
        CHECKS[check](opened)
