"""The notebooks' optional live-model cells: how to set a real model up, and its failures as one line.

A live cell runs only when `OPENAI_API_KEY` and `OPENAI_MODEL` are set, and otherwise prints
`HOW_TO`, one line. A local server (Ollama, llama.cpp) speaks the same protocol through
`OPENAI_BASE_URL` and checks no key, but the client still needs one: any text will do.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from memkit.errors import MemkitError, ModelError

HOW_TO = ("To run this with a real model, set OPENAI_API_KEY and OPENAI_MODEL, then run this cell "
          "again; for a local server also set OPENAI_BASE_URL (Ollama: http://localhost:11434/v1, "
          "llama.cpp: http://localhost:8080/v1) and give any OPENAI_API_KEY, e.g. 'unused'.")
"""The one line a live cell prints when no model is set up."""

FAILED = "The live model could not finish"
"""The start of the one line a live cell prints when the model or its endpoint failed."""


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Print a failure of the live model as one line (what failed and what to do), not a traceback.

    Catches memkit's own errors (a `ModelError` names the endpoint and the remedy), a timeout, and
    the `RuntimeError` of a session run in a new process (its message holds the child's last error
    line). Anything else is a bug of the cell and is raised as usual.

    Example:
        >>> with one_line_errors():
        ...     raise TimeoutError("no answer in 30 s")
        The live model could not finish: no answer in 30 s. Nothing after the failure ran.
    """
    try:
        yield
    except (MemkitError, TimeoutError, RuntimeError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{FAILED}: {text.rstrip('.')}. Nothing after the failure ran.")


async def model_summary(model: Any, prompt: str, turns: list[dict[str, Any]]) -> str:
    """Ask `model` (an `OpenAIModel`) to summarise a finished session: `prompt` as its instructions,
    the turns as JSON data in the user message (never as instructions), no tools.

    Raises:
        ModelError: the model answered with no text (the cell prints it as one line).
    """
    conversation = [{"role": t["role"], "content": t["content"]} for t in turns]
    reply = await model.complete([{"role": "system", "content": prompt},
                                  {"role": "user", "content": json.dumps({"conversation": conversation},
                                                                         ensure_ascii=False)}], [])
    text = " ".join((reply.content or "").split())
    if not text:
        raise ModelError("the model answered with no summary; try again, or another model")
    return text
