"""A notebook run up to its live-model cell, with the kit's local chat-completions server as the model.

Shared by the live-cell tests of 00, 03, 04 (notebooks/test_live_cells.py, test_course.py) and 10
(test_notebook10_live.py): the environment names the server as a student's would name OpenAI or
Ollama, the notebook runs in a real kernel from its first cell to the live cell, and the server is
closed whatever happens. The caller skips first when nbformat or nbclient is absent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

from _model_server import ChatServer


def run_to_live_cell(path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch, *, which: int = 0,
                     key: str = "unused", model: str = "local-model", edit: tuple[str, str] | None = None,
                     after: str | None = None) -> tuple[Any, Any]:
    """Run `path` up to its live cell number `which` with the endpoint set, then `after` in the same kernel.

    `key` is the OPENAI_API_KEY (a local server checks none: any text will do, as the cells say);
    `edit` (old, new) changes the live cell's source first, as a student would.
    Returns the live cell and the cell `after` ran in (None without it).
    """
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("OPENAI_MODEL", model)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    nb = nbformat.read(path, as_version=4)
    at = [i for i, cell in enumerate(nb.cells) if "live-model" in cell.metadata.get("tags", [])][which]
    if edit is not None:
        assert edit[0] in nb.cells[at].source, edit
        nb.cells[at].source = nb.cells[at].source.replace(*edit)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(path.parent)}})
    probe = None
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells[: at + 1]):
                if cell.cell_type == "code":
                    client.execute_cell(cell, index)
            if after is not None:
                probe = nbformat.v4.new_code_cell(after)
                client.execute_cell(probe, at + 1)  # in place of the next cell, unused
    finally:
        server.close()
    return nb.cells[at], probe
