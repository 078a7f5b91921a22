"""An MCP client for a notebook: `memkit mcp` in a subprocess, its questions answered by a plain function.

An MCP host (VS Code, Cursor, Claude Code) shows the server's question to the person while the tool
call waits. A notebook cannot wait in a cell for a button (the kernel handles the click only once
the cell is done), so `McpClient` runs the SDK's own client (`stdio_client` + `ClientSession`, the
initialize handshake) on a thread of its own: `call` returns the tool's result, or the `Question` the
server asked while the call waits; `answer(question, "accept" | "decline" | "cancel")` sends the
person's answer and returns the call's result. `QuestionView` is the same with two buttons.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import html
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Literal, cast

from memkit.inspector._support import widgets as _widgets

__all__ = ["McpClient", "Question", "QuestionView", "answer", "host_config"]

TIMEOUT = 60.0
"""Seconds a call waits for the server (its start included) before giving up with an error."""


@dataclasses.dataclass(eq=False)
class Question:
    """What the server asked the person during a tool call, while that call waits for the answer."""

    message: str
    tool: str
    arguments: dict[str, Any]
    _answer: concurrent.futures.Future[str] = dataclasses.field(default_factory=concurrent.futures.Future, repr=False)
    _result: concurrent.futures.Future[dict[str, Any]] = dataclasses.field(
        default_factory=concurrent.futures.Future, repr=False)

    @property
    def answered(self) -> str | None:
        """The answer given (`accept`, `decline`, `cancel`), or None while the call waits."""
        return self._answer.result() if self._answer.done() else None

    def __str__(self) -> str:
        return self.message


def answer(question: Question, action: str) -> dict[str, Any]:
    """Answer `question` as the person (`accept`, `decline` or `cancel`) and return the tool's result.

    A question is answered once: answering it again returns the result of the first answer.
    """
    if action not in ("accept", "decline", "cancel"):
        raise ValueError(f"action is {action!r}; answer with 'accept', 'decline' or 'cancel'")
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        question._answer.set_result(action)
    return question._result.result(timeout=TIMEOUT)


@dataclasses.dataclass(eq=False)
class _Call:
    """One tool call in flight: `first` gets its result, or the question it waits on."""

    name: str
    arguments: dict[str, Any]
    first: concurrent.futures.Future[Any] = dataclasses.field(default_factory=concurrent.futures.Future)
    question: Question | None = None


class McpClient:
    """The SDK's MCP client, connected to `memkit mcp --db DB --user USER` over stdio.

    One call at a time: a call waiting on an unanswered question must be answered first.

    Args:
        db: the memkit database the server serves.
        user: the user on the server's command line.
        can_ask: False makes a client that declares no elicitation capability (it cannot ask anyone).

    Example:
        >>> client = McpClient(workspace / "memory.sqlite3", "alice")        # doctest: +SKIP
        >>> question = client.call("memory_put", {"kind": "preference", "key": "seat", "value": "window"})
        >>> answer(question, "accept")["stored"]                               # doctest: +SKIP
        True
    """

    def __init__(self, db: str | Path, user: str, *, can_ask: bool = True) -> None:
        from mcp.client.stdio import StdioServerParameters  # the `mcp` extra, imported on first use

        self.user, self.can_ask = user, can_ask
        self._params = StdioServerParameters(
            command=sys.executable, args=["-m", "memkit", "mcp", "--db", str(db), "--user", user])
        # The server's log lines (a notebook shows what the tools return, not a server's log).
        self._errlog = open(os.devnull, "w")  # noqa: SIM115 - closed by close()
        self._session: Any = None
        self._current: _Call | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(ready),), daemon=True,
                                        name="memkit-mcp-client")
        self._thread.start()
        ready.result(timeout=TIMEOUT)

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        # The SDK's transports are entered and left in one task: this one, for the client's life.
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            async with stdio_client(self._params, errlog=self._errlog) as (read, write):
                callback = self._elicit if self.can_ask else None
                async with ClientSession(read, write, elicitation_callback=callback) as session:
                    await session.initialize()
                    self._session = session
                    ready.set_result(None)
                    await self._stop.wait()
        except BaseException as exc:  # the server did not start: say why in the notebook
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def _elicit(self, context: Any, params: Any) -> Any:
        import mcp_types

        call = self._current
        assert call is not None, "the server asked a question outside a tool call"
        call.question = Question(params.message, call.name, call.arguments)
        call.first.set_result(call.question)  # `call` returns the question; the tool call waits here
        action = cast(Literal["accept", "decline", "cancel"], await asyncio.wrap_future(call.question._answer))
        return mcp_types.ElicitResult(action=action, content={} if action == "accept" else None)

    async def _call(self, call: _Call) -> None:
        try:
            result = await self._session.call_tool(call.name, call.arguments)
            payload = (dict(result.structured_content) if result.structured_content is not None
                       and not result.is_error else
                       {"error": " ".join(getattr(c, "text", "") for c in result.content)})
        except Exception as exc:  # a protocol error: shown as the call's result, like a tool error
            payload = {"error": f"{type(exc).__name__}: {exc}"}
        target = call.question._result if call.question is not None else call.first
        target.set_result(payload)

    def tools(self) -> list[dict[str, Any]]:
        """The server's tools as plain dicts: name, annotations and input schema."""
        listed = self._run(self._session.list_tools())
        return [{"name": t.name, "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else {},
                 "input_schema": t.input_schema} for t in listed.tools]

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | Question:
        """Call a tool: its result (a dict; `{"error": ...}` for a tool error), or the `Question`
        the server is waiting on (answer it with `answer(question, ...)`)."""
        before = self._current
        if before is not None and before.question is not None and not before.question._result.done():
            raise RuntimeError("the server still waits for the answer to the last question; "
                               "answer it first: answer(question, 'accept' or 'decline')")
        self._current = _Call(name, dict(arguments))
        self._run_soon(self._call(self._current))
        return self._current.first.result(timeout=TIMEOUT)

    def _run_soon(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def _run(self, coroutine: Any) -> Any:
        return self._run_soon(coroutine).result(timeout=TIMEOUT)

    def close(self) -> None:
        """Close the connection; the server exits with it. Safe to call twice."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=TIMEOUT)
        self._errlog.close()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"McpClient(user={self.user!r}, can_ask={self.can_ask})"


class QuestionView:
    """Two buttons for a `Question`: Approve and Decline call `answer(question, ...)` and show its result.

    The view is a skin over `answer`: the next cell can call `answer(question, "accept")` itself.
    """

    def __init__(self, question: Question) -> None:
        widgets = _widgets()
        self.question = question
        text = widgets.HTML("<pre style='margin:0'>" + html.escape(question.message, quote=False) + "</pre>")
        approve = widgets.Button(description="Approve", button_style="success", icon="check")
        decline = widgets.Button(description="Decline", button_style="danger", icon="times")
        self.output = widgets.Output()
        approve.on_click(lambda _: self._show(answer(question, "accept")))
        decline.on_click(lambda _: self._show(answer(question, "decline")))
        self.widget = widgets.VBox([text, widgets.HBox([approve, decline]), self.output])

    def _show(self, result: dict[str, Any]) -> None:
        # Rendered from the click's callback, never in the cell that displays the view (nbval).
        self.output.clear_output()
        with self.output:
            print(json.dumps(result, indent=2, ensure_ascii=False))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def host_config(db: str | Path, user: str, host: str = "vscode") -> str:
    """What `memkit mcp --db DB --user USER --print-config HOST` prints, run for real.

    The JSON holds this machine's absolute paths (a host needs them); in a notebook's output the
    install's folder and the workspace are shortened to `<venv>` and `<workspace>`, which are the
    only parts that differ from one machine to the next.
    """
    command = [sys.executable, "-m", "memkit", "mcp", "--db", str(db), "--user", user, "--print-config", host]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if done.returncode != 0:  # its last line says what was wrong; the usage lines above it do not
        said = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise RuntimeError(f"memkit mcp --print-config failed: {said[-1]}")
    shown = done.stdout.replace(str(Path(db).resolve().parent), "<workspace>")
    shown = shown.replace(str(Path(sys.prefix)), "<venv>")
    return shown + done.stderr.strip()
