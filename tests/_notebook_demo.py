"""What the tests of classroom share (tests/notebooks/test_notebook_*.py import it first).

They need the notebook extra: importing this module skips the importing test module without it.
Their `demo` fixture lives in _store_helpers (a conftest plugin); the `demo` store is real (a SQLite
file under tmp_path); clicks in those tests are simulated with `Button.click()` and slider or
dropdown moves by setting `.value`, which runs the same handlers a browser would.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
