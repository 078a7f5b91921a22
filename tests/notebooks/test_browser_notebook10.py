"""Notebook 10 after Run All in a real browser: each proposals panel asks what its text asks.

The text above the first panel asks the student to approve the city and the diet and reject the
name; after Run All (JupyterLab, headless Chromium, as tests/notebooks/test_browser.py runs it)
that panel must list exactly those three proposals, not the ones a later cell made. The second
panel, further down, lists the drink and the allergy its own text leaves to the student.
"""

from __future__ import annotations

import test_browser as shared
from test_browser import ROOT, Browser, Lab, open_and_run_all

lab, browser = shared.lab, shared.browser  # the module's fixtures: JupyterLab and headless Chromium

NOTEBOOK = ROOT / "notebooks" / "10_what_to_remember.ipynb"


def test_after_run_all_the_first_panel_asks_about_the_city_the_diet_and_the_name(browser: Browser,
                                                                                lab: Lab) -> None:
    opened = open_and_run_all(browser, lab, NOTEBOOK)
    try:
        assert not opened.problems, "\n".join(opened.problems)
        panels = opened.page.locator(".memkit-proposals")
        assert panels.count() == 2, f"{panels.count()} proposals panels on the page"
        first, later = (" ".join((panels.nth(i).inner_text() or "").split()) for i in (0, 1))
        for asked in ("city = 'Lisbon'", "diet = 'vegetarian'", "name = 'Sam'"):
            assert asked in first, first
        assert first.count("Approve") == 3 and "green tea" not in first and "peanuts" not in first, first
        assert "drink = 'green tea'" in later and "allergy = 'peanuts'" in later, later
        assert "Lisbon" not in later, later
        opened.screenshot("-panels")
    finally:
        opened.page.close()
