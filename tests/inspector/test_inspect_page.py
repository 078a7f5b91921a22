"""`memkit inspect`: the inspector as a web page, run as a real process and used in a real browser.

Each page test starts `memkit inspect FILE --no-browser` as a subprocess on a store with known
records, reads the URL it prints, and drives Debian's chromium (Playwright from PyPI, as
tests/notebooks/test_browser.py does). The page is Voilà running the inspector in a kernel of its
own, so a test waits for the widgets to render. A read-only page must leave the file's bytes as
they were; an `--edit` page writes through Confirm; a request without the printed token gets no
inspector; SIGTERM, Ctrl-C (SIGINT) and even SIGKILL of the command leave no kernel behind.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _cli_helpers import env_with, memkit
from _peer_files import make_peer_file
from memkit.store import MemoryStore

pytest.importorskip("voila", reason="memkit inspect needs the inspect extra (pip install -e '.[inspect]')")
psutil = pytest.importorskip("psutil")

START_TIMEOUT_S = 60
"""How long the command may take to print its URL (imports Voilà, binds, starts its loop)."""
PAGE_TIMEOUT_S = 45
"""How long a page may take to show the inspector (Voilà starts a kernel and runs the page's cell)."""


# -- the command as a process ------------------------------------------------------------------------


@dataclasses.dataclass
class Served:
    """One `memkit inspect` process: its URL (with the token), and its stderr so far."""

    process: subprocess.Popen[str]
    url: str
    log: Path

    @property
    def base(self) -> str:
        return self.url.split("?", 1)[0]

    def kernels(self) -> list[psutil.Process]:
        """The kernels this server started (its children running ipykernel)."""
        found = []
        for child in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if "ipykernel_launcher" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.NoSuchProcess:
                pass
        return found

    def stop(self, signum: int) -> int:
        """Send `signum` and wait for the process to end; returns its exit code."""
        self.process.send_signal(signum)
        return self.process.wait(timeout=60)


def gone(process: psutil.Process) -> bool:
    """Whether a process has ended (a zombie no one reaped yet has ended too)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
    return True


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start `memkit inspect ARGS` (as many as a test asks, `env` added to their environment); each is
    ended afterwards."""
    started: list[Served] = []

    def start(*args: str, **env: str) -> Served:
        log = tmp_path / f"inspect-{len(started)}.log"
        with log.open("w") as err:
            process = subprocess.Popen([sys.executable, "-m", "memkit", "inspect", *args],
                                       stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path,
                                       env=env_with(**env), start_new_session=True)
        assert process.stdout is not None
        line = process.stdout.readline().strip()  # the URL, once the server answers (or "" at exit)
        served = Served(process, line, log)
        started.append(served)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{32,}", line), \
            f"printed {line!r}; stderr: {log.read_text()[-2000:]}"
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            os.killpg(served.process.pid, signal.SIGKILL)
            served.process.wait()


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    """A store with known records: alice's drink (green tea, then jasmine tea) and city, bob's drink."""
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "green tea")
        store.put("alice", "s1", "preference", "drink", "jasmine tea")
        store.put("alice", "s1", "episode", "city", "moved to Lisbon in May")
        store.put("bob", "s2", "preference", "drink", "espresso")
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- refusals before anything starts (no browser needed) -----------------------------------------------


@pytest.mark.parametrize(("args", "says"), [
    (["no-such.sqlite3"], "no-such.sqlite3; give a memkit SQLite file, a postgresql:// URL"),
    (["notes.txt"], "notes.txt is not a SQLite database"),
    (["agents.db", "--edit"], "shows other frameworks' files read-only; drop --edit"),
    (["memory.sqlite3", "--db", "memory.sqlite3"], "give one of them"),
    (["memory.sqlite3", "--port", "70000"], "--port is 70000"),
])
def test_what_cannot_be_shown_is_refused_in_one_line_before_anything_starts(tmp_path, store_file, args, says):
    (tmp_path / "notes.txt").write_text("not a database")
    make_peer_file("openai-agents SQLiteSession", tmp_path / "agents.db")
    before = sorted(p.name for p in tmp_path.iterdir())
    done = memkit("inspect", *args, "--no-browser", cwd=tmp_path, env=env_with(), timeout=60)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert says in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing made (no -wal, no folder)


def test_a_url_that_cannot_be_printed_stops_the_page_and_says_so(tmp_path, store_file):
    process = subprocess.Popen([sys.executable, "-m", "memkit", "inspect", str(store_file), "--no-browser"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_with())
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # no one will ever see the URL, and so the token
    assert process.wait(timeout=60) == 2
    said = process.stderr.read()
    assert said.startswith("error: the page's URL could not be printed") and said.count("\n") == 1, said


def test_a_busy_port_is_refused_in_one_line(tmp_path, store_file):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = memkit("inspect", str(store_file), "--port", str(port), "--no-browser", env=env_with(), timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"error: port {port} on 127.0.0.1 is in use; give another --port, or 0 for any free one\n"


# -- the page in a real browser ----------------------------------------------------------------------------


def find_chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("BROWSER TEST SKIPPED: no Chromium at /usr/bin/chromium or on PATH (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def open_page(browser, url: str):
    """A new page at `url`, once the inspector's widgets have rendered (its Stage edit button)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(20_000)
    page.goto(url)
    page.wait_for_selector("button:text-is('Stage edit')", timeout=PAGE_TIMEOUT_S * 1000)
    return page


def records_text(page) -> str:
    return page.locator(".widget-html-content table").first.inner_text()


def test_the_read_only_page_needs_the_token_shows_the_records_and_changes_nothing(browser, serve, store_file):
    before = digest(store_file)
    served = serve(str(store_file), "--no-browser")
    # Without the printed token: the login page, never the inspector (nor its kernels' API).
    for url in (served.base, served.base + "?token=wrong", served.base + "?token=" + "x" * 43):
        page = browser.new_page()
        page.goto(url)
        assert "/login" in page.url, page.url
        body = page.inner_text("body")
        assert "jasmine tea" not in body and "Stage edit" not in body
        assert "New Password" not in body  # no offer to save a login in the user's Jupyter config
        page.close()
    for path in ("", "api/kernels", "voila/render/inspector.ipynb"):
        try:
            with urllib.request.urlopen(urllib.request.Request(served.base + path), timeout=30) as response:
                answered = response.url, response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            answered = exc.url, str(exc.code)
        assert "/login" in answered[0] or answered[1] in ("403", "404"), answered
        assert "jasmine tea" not in answered[1]
    # With it: the inspector, read-only.
    page = open_page(browser, served.url)
    shown = records_text(page)
    assert "drink" in shown and "jasmine tea" in shown and "moved to Lisbon in May" in shown, shown
    assert "read-only: nothing on this page can change the database" in page.inner_text("body")
    # Nothing offers a change: the Edit switch cannot reopen the file, staging is off.
    assert page.locator("button.widget-toggle-button:text-is('Edit')").is_disabled()
    assert page.locator("button:text-is('Stage edit')").is_disabled()
    assert page.locator("button:text-is('Stage delete')").is_disabled()
    # Even a switch forced on in the page (its `disabled` removed) is refused by the kernel.
    edit = page.locator("button.widget-toggle-button:text-is('Edit')")
    edit.evaluate("button => { button.disabled = false; }")
    edit.click()
    status = page.locator(".memkit-inspector-status")
    assert wait_until(lambda: "cannot reopen it" in status.inner_text(), 15), status.inner_text()
    assert page.locator("button:text-is('Stage edit')").is_disabled()
    # Looking around (another user) only reads.
    page.locator(".widget-inline-hbox:has(> label.widget-label:text-is('user')) input").fill("bob")
    assert wait_until(lambda: "espresso" in records_text(page), 15), records_text(page)
    kernels = served.kernels()
    assert kernels, "the page's kernel is not a child of memkit inspect"
    page.close()
    assert served.stop(signal.SIGTERM) == 0
    assert all(gone(k) for k in kernels)
    assert digest(store_file) == before
    # The terminal shows the command's own lines: no traceback, no warning of the libraries under it.
    said = served.log.read_text().splitlines()
    assert said and all(line.startswith("memkit inspect: ") for line in said), said
    assert not store_file.with_name("memory.sqlite3-wal").exists()
    assert not store_file.with_name("memory.sqlite3-shm").exists()


def test_the_edit_page_changes_a_value_with_its_confirm_and_ctrl_c_ends_it(browser, serve, store_file):
    served = serve(str(store_file), "--edit", "--no-browser")
    page = open_page(browser, served.url)
    assert "editing" in page.inner_text("body")
    page.locator(".widget-inline-hbox:has(> label.widget-label:text-is('key')) select").select_option(
        "preference:drink")
    page.locator(".widget-inline-hbox:has(> label.widget-label:text-is('new value')) input").fill("oolong")
    page.locator("button:text-is('Stage edit')").click()
    confirm = page.locator("button:text-is('Confirm')")
    assert wait_until(confirm.is_enabled, 15)
    confirm.click()
    assert wait_until(lambda: "oolong" in records_text(page), 15), records_text(page)
    kernels = served.kernels()
    assert kernels
    page.close()
    with MemoryStore(store_file, read_only=True) as store:
        assert store.get("alice", "preference", "drink")["value"] == "oolong"
        last = store.history("alice", "preference", "drink")[-1]
        assert last["session"] == "inspector" and last["confirmation"], last
    # Ctrl-C in a terminal signals the command's whole process group.
    os.killpg(served.process.pid, signal.SIGINT)
    assert served.process.wait(timeout=60) == 0
    assert all(gone(k) for k in kernels)
    assert "stopped" in served.log.read_text()


def test_another_frameworks_file_opens_as_in_the_notebook_and_sigkill_leaves_no_kernel(browser, serve, tmp_path):
    peer = make_peer_file("openai-agents SQLiteSession", tmp_path / "agents.db")
    before = digest(peer)
    # Without --no-browser: $BROWSER (here a script that notes what it was given) opens the page
    # through a private file, so the token is on no command line.
    opened = tmp_path / "browser-was-given.txt"
    script = tmp_path / "note-browser.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{opened}"\n')
    script.chmod(0o700)
    served = serve(str(peer), BROWSER=f"{script} %s")
    assert wait_until(opened.exists, 30)
    given = opened.read_text()
    token = served.url.split("token=", 1)[1]
    assert given.startswith("file://") and token not in given, given
    redirect = Path(given.removeprefix("file://"))
    assert served.url in redirect.read_text() and redirect.stat().st_mode & 0o077 == 0
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(served.url)
    page.wait_for_selector("text=alice-1", timeout=PAGE_TIMEOUT_S * 1000)
    assert "openai-agents SQLiteSession" in page.inner_text("body")
    kernels = served.kernels()
    assert kernels
    served.stop(signal.SIGKILL)  # no chance to end its kernels
    page.close()
    # The kernel polls its parent (ipykernel's ParentPollerUnix) and ends once it is gone.
    assert wait_until(lambda: all(gone(k) for k in kernels), 30), [k.pid for k in kernels if not gone(k)]
    assert digest(peer) == before


# -- a PostgreSQL URL ------------------------------------------------------------------------------------


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[tuple[str, str]]:
    """Two fresh databases on the session's PostgreSQL server: (one with a memkit store, one empty)."""
    psycopg = pytest.importorskip("psycopg")
    from psycopg.conninfo import make_conninfo

    names = [f"inspect_page_{os.getpid()}_{n}" for n in ("store", "empty")]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    urls = [make_conninfo(pg_url, dbname=name) for name in names]
    from memkit.store import PostgresStore

    with PostgresStore(urls[0]) as store:
        store.put("alice", "s1", "preference", "drink", "jasmine tea")
    yield urls[0], urls[1]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def html_of(widget) -> str:
    """Every HTML text a widget and the widgets inside it show."""
    own = widget.value if isinstance(getattr(widget, "value", None), str) else ""
    return own + "".join(html_of(child) for child in getattr(widget, "children", ()))


@pytest.mark.postgres
def test_a_postgresql_url_is_checked_before_anything_starts_and_shown_by_the_page(pg_database, monkeypatch):
    store_url, empty_url = pg_database
    # The command accepts the store's URL (it then stops at the busy port, the next thing it checks) ...
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = memkit("inspect", store_url, "--port", str(port), "--no-browser", env=env_with(), timeout=60)
    assert done.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in done.stderr, done.stderr
    # ... refuses a database without memkit's tables in one line, creating none ...
    done = memkit("inspect", empty_url, "--no-browser", env=env_with(), timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "holds no memkit store; nothing was created" in done.stderr
    # ... and the page's kernel shows the store from the URL in its environment, read-only.
    from memkit.cli.inspect_page import EDIT_VARIABLE, TARGET_VARIABLE, page_view

    monkeypatch.setenv(TARGET_VARIABLE, store_url)
    monkeypatch.setenv(EDIT_VARIABLE, "0")
    shown = html_of(page_view())
    assert "jasmine tea" in shown and "read-only: nothing on this page can change the database" in shown
    assert "password" not in shown
