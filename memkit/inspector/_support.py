"""What every view needs: the optional notebook packages, imported on first use, the `View` base
and the status line.

ipywidgets, pandas and matplotlib are optional (the `notebooks` extra): they are
imported inside the functions that need them, so importing the inspector never pulls them in.
"""

from __future__ import annotations

import html
import importlib
from typing import Any

from ..errors import install_hint

INSTALL_HINT = install_hint("notebooks")


def optional(name: str) -> Any:
    """Import an optional notebook dependency, or say which extra installs it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            f"the notebook views need {name.split('.')[0]}; install the notebook extra: {INSTALL_HINT}"
        ) from None


def widgets() -> Any:
    """The `ipywidgets` module."""
    return optional("ipywidgets")


def pandas() -> Any:
    """The `pandas` module."""
    return optional("pandas")


def status_html(message: str, ok: bool = True, css_class: str = "") -> str:
    """A one-line status message, green when `ok`, red otherwise (with `css_class`, for a page to find it)."""
    colour = "#1b5e20" if ok else "#b71c1c"
    named = f' class="{css_class}"' if css_class else ""
    return f'<p{named} style="color:{colour}">{html.escape(message)}</p>'


class View:
    """Base of the views: builds its widget on first use and shows a short text in plain-text outputs.

    The text (the view's `repr`) stands in for the widget where no widget can be drawn (a terminal,
    nbval), and it stays the same from run to run, unlike ipywidgets' own repr.
    """

    _widget: Any = None

    def _build(self) -> Any:  # pragma: no cover - each view overrides it or sets `_widget` itself
        raise NotImplementedError

    @property
    def widget(self) -> Any:
        """The ipywidgets box of this view (built on first use)."""
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude))
        bundle["text/plain"] = repr(self)
        return bundle
