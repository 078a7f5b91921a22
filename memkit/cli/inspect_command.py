"""`memkit inspect`: the memory inspector as a web page outside Jupyter (the `inspect` extra).

The page is served on 127.0.0.1 only, with a fresh random token that the printed URL carries (a
request without it gets the login page, never the inspector), until Ctrl-C or SIGTERM, which end its
kernels too. What cannot be shown (no such file, a file that is no database, `--edit` on a file the
inspector only reads, a busy port) is refused before anything starts: `error: ...`, exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import os
import secrets
import signal
import socket
import sys
import tempfile
import threading
import webbrowser
from pathlib import Path
from typing import Any

from ..store.targets import postgres_conninfo
from .options import CliError, database_url, db_path

HOST = "127.0.0.1"


def add_command(command: Any) -> None:
    """Add `memkit inspect` to the parser (`command` makes a subcommand with --db and --workspace)."""
    sub = command("inspect", cmd_inspect, "show the memory inspector as a web page, read-only unless --edit "
                  "(the inspect extra)")
    sub.add_argument("target", nargs="?", metavar="PATH_OR_URL",
                     help="a memkit SQLite file, a postgresql:// URL, or another framework's memory file "
                          "(openai-agents, LangGraph, mem0); default: the store --db or --workspace names")
    sub.add_argument("--edit", action="store_true", help="let the page change a memkit store (each change "
                     "still needs its Confirm)")
    sub.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default 0: any free port)")
    sub.add_argument("--no-browser", action="store_true", help="only print the page's URL")


def cmd_inspect(args: argparse.Namespace) -> None:
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port is {args.port}; give a port from 1 to 65535, or 0 for any free one")
    target = _target(args)
    _check_target(target, args.edit)
    from .inspect_page import EDIT_VARIABLE, TARGET_VARIABLE, serve, write_page

    sock = _bind(args.port)
    token = secrets.token_urlsafe(32)
    url = f"http://{HOST}:{sock.getsockname()[1]}/?token={token}"
    with tempfile.TemporaryDirectory(prefix="memkit-inspect-") as folder:  # 0700: the page and its kernelspec
        notebook = write_page(Path(folder))
        os.environ[TARGET_VARIABLE] = target  # the kernels inherit it; no file holds a URL's password
        os.environ[EDIT_VARIABLE] = "1" if args.edit else "0"
        # The page's kernelspec (this Python) before any other of its name: Voilà looks there first.
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [folder, os.environ.get("JUPYTER_PATH")]))

        unprinted: list[OSError] = []

        def ready() -> None:
            try:
                if sys.stdout is None:  # started with stdout closed (`>&-`)
                    raise OSError("standard output is closed")
                print(url, flush=True)
            except OSError as exc:  # no one can open a page whose token was never shown: stop at once
                unprinted.append(exc)
                signal.raise_signal(signal.SIGTERM)
                return
            how = "editing" if args.edit else "read-only"
            print(f"memkit inspect: serving the inspector ({how}) at the URL above; Ctrl-C stops it",
                  file=sys.stderr, flush=True)
            if not args.no_browser:
                _open_browser(url, Path(folder))

        try:
            serve(notebook, sock, token, ready)
        except ImportError as exc:  # the message names the extra to install
            raise CliError(str(exc)) from None
        finally:
            sock.close()
    if unprinted:
        raise CliError(f"the page's URL could not be printed ({unprinted[0]}); it was served to no one and is "
                       "stopped. Run memkit inspect with its standard output open")
    print("memkit inspect: stopped", file=sys.stderr, flush=True)


def _target(args: argparse.Namespace) -> str:
    """PATH_OR_URL, else the store --db, --workspace or the environment names, as other commands do."""
    if args.target is None:
        url = database_url(args)
        return url if url is not None else os.path.abspath(db_path(args)[0])
    if args.db is not None or args.workspace is not None:
        raise CliError(f"PATH_OR_URL {args.target} and --db/--workspace both name a database; give one of them")
    if not args.target.strip():
        raise CliError("PATH_OR_URL is empty (an unset shell variable?); give a file or a postgresql:// URL")
    # The page's kernel runs in another folder: a relative path is made absolute here.
    return args.target if postgres_conninfo(args.target) is not None else os.path.abspath(args.target)


def _check_target(target: str, edit: bool) -> None:
    """Refuse, before anything starts, what the page could not show as asked (opening it the way the
    page will, then closing it)."""
    from ..inspector.peers import what_is  # the inspector only when a page is asked for: other commands start faster
    from ..inspector.reading import open_target

    if postgres_conninfo(target) is not None:
        open_target(target, edit).close()  # a StoreError names what is wrong with the URL or server
        return
    if not os.path.lexists(target):
        raise CliError(f"there is no file {target}; give a memkit SQLite file, a postgresql:// URL or another "
                       "framework's memory file (openai-agents, LangGraph, mem0)")
    kind, line = what_is(target)
    if kind == "memkit":
        open_target(target, edit).close()
    elif kind == "peer" and edit:
        raise CliError(f"{line}: the inspector shows other frameworks' files read-only; drop --edit")
    elif kind != "peer":
        raise CliError(f"{line}; the inspector shows memkit stores and openai-agents, LangGraph and mem0 files")


def _bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` (0: any free port), bound before the server starts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} on {HOST} is in use; give another --port, or 0 for any free one") from None
        raise CliError(f"cannot listen on {HOST}:{port} ({exc.strerror}); give another --port") from None
    return sock


def _open_browser(url: str, folder: Path) -> None:
    """Open the page through a private file that redirects to it, as Jupyter does, so the token is not
    on the browser's command line (which every user of the machine can read)."""
    opener = folder / "open.html"
    with os.fdopen(os.open(opener, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
        out.write(f'<meta http-equiv="refresh" content="0;url={url}">')

    def launch() -> None:  # a text browser would hold the server's loop: open it from a thread
        if not webbrowser.open(opener.as_uri()):
            print("memkit inspect: no browser found; open the URL above", file=sys.stderr, flush=True)

    threading.Thread(target=launch, name="memkit-inspect-browser", daemon=True).start()
