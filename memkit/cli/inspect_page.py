"""The inspector as a web page: the notebook Voilà renders, what its kernel shows, and the server.

`memkit inspect` (`inspect_command`) writes a one-cell notebook and its kernelspec into a private
folder and serves it with Voilà (the `inspect` extra), which runs the notebook in a kernel of its
own per page and renders the widgets it displays as a web page: the same inspector the notebooks
use. What to show goes to the kernel in its environment (`TARGET_VARIABLE`), so a PostgreSQL
password is never written to a file. Notes on the design: docs/design/inspector_page.md.
"""

from __future__ import annotations

import atexit
import html
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import install_hint
from ..inspector import inspect
from ..inspector.peers import what_is
from ..inspector.reading import open_target
from ..store.targets import postgres_conninfo

TARGET_VARIABLE = "MEMKIT_INSPECT_TARGET"
"""The environment variable that names the database to the page's kernel (a path or a URL)."""
EDIT_VARIABLE = "MEMKIT_INSPECT_EDIT"
"""Set to "1" in the kernel's environment when the page may change the database (`--edit`)."""
KERNEL_NAME = "memkit-inspect"
"""The kernelspec the page's notebook names: this interpreter, whatever `python3` means elsewhere."""
PAGE_CODE = "from memkit.cli.inspect_page import page_view\npage_view()"


def page_view() -> Any:
    """What the page shows (run in the page's kernel): a header, then the inspector of the target.

    A memkit store is opened here, read-only unless the page was started with `--edit`, and given to
    the inspector already open, so its Edit switch stays off: nothing on a read-only page can reopen
    the database for writing. Another framework's file gets the notebook's read-only `PeerInspector`.

    Returns:
        An ipywidgets box (Voilà renders it).
    """
    from ..inspector._support import widgets

    target, edit = os.environ[TARGET_VARIABLE], os.environ.get(EDIT_VARIABLE) == "1"
    is_store = postgres_conninfo(target) is not None or what_is(target)[0] == "memkit"
    if is_store:
        store = open_target(target, edit)
        atexit.register(store.close)  # the kernel ends with the page: close (and checkpoint) the store
        view: Any = inspect(store)
        where = view.where
    else:
        view, where = inspect(target), Path(target).name
    how = ("editing: a confirmed change is written to the database" if edit else
           "read-only: nothing on this page can change the database (to make changes, stop this page and "
           "start it again with memkit inspect … --edit)")
    header = widgets().HTML(f"<h3 style='margin:4px 0'>memkit inspector: {html.escape(where)}</h3>"
                            f"<p class='memkit-page-mode'>{html.escape(how)}</p>")
    return widgets().VBox([header, view.widget])


def write_page(folder: Path) -> Path:
    """Write the page's notebook and its kernelspec (this Python) into `folder`; returns the notebook.

    The folder should be private and hold nothing else: Voilà serves the notebook's folder.
    """
    kernel = folder / "kernels" / KERNEL_NAME
    kernel.mkdir(parents=True, mode=0o700)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "memkit inspect", "language": "python"}), encoding="utf-8")
    notebook = folder / "inspector.ipynb"
    notebook.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "page", "metadata": {}, "outputs": [],
                   "source": PAGE_CODE}],
        "metadata": {"kernelspec": {"name": KERNEL_NAME, "display_name": "memkit inspect", "language": "python"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return notebook


def serve(notebook: Path, sock: socket.socket, token: str, on_ready: Callable[[], None]) -> None:
    """Serve `notebook` with Voilà on the bound socket `sock`, each request needing `token`, until
    SIGINT or SIGTERM; then end every kernel the pages started, and return.

    `on_ready` is called once the server answers. Raises ImportError naming the `inspect` extra when
    Voilà is not installed.
    """
    try:
        import tornado.httpserver
        import tornado.ioloop
        from traitlets.config import Config
        from voila.app import Voila  # type: ignore[import-untyped]  # voila ships no type information
    except ImportError:
        raise ImportError(f"memkit inspect needs Voilà; install the inspect extra: {install_hint('inspect')}") \
            from None

    class PageServer(Voila):
        """Voilà on a socket bound beforehand (the port is known and free before anything starts)."""

        def listen(self) -> None:
            server = tornado.httpserver.HTTPServer(self.app)
            server.add_sockets([sock])
            self.port = sock.getsockname()[1]
            self.ioloop = tornado.ioloop.IOLoop.current()
            for signum in (signal.SIGINT, signal.SIGTERM):  # stop the loop, then end the kernels (below)
                signal.signal(signum, self._handle_signal_stop)
            self.ioloop.add_callback(on_ready)
            try:
                self.ioloop.start()
            finally:
                server.stop()
                self.stop()  # Voilà's: shuts down every kernel, removes its connection files

    config = Config()
    config.Voila.token = token
    config.Voila.open_browser = False
    config.Voila.root_dir = str(notebook.parent)
    config.Voila.log_level = "ERROR"  # not its notices (an untrusted notebook): the page is ours
    # The login page must not offer to save a password in the user's Jupyter config (a change
    # outside memkit, and a login that would outlive this page's token).
    config.PasswordIdentityProvider.allow_password_change = False
    # jupyter_server's default ping timeout (90 s) is longer than tornado 6.5 accepts: equal, unwarned.
    config.Voila.tornado_settings = {"ws_ping_interval": 30_000, "ws_ping_timeout": 30_000}
    config.KernelManager.transport = "ipc"  # the kernel's sockets in Voilà's private folder, not on TCP ports
    app = PageServer(config=config)
    app.initialize([str(notebook)])
    app.start()
