"""How an exercise's check words a student's prediction against what was measured."""

from __future__ import annotations

from typing import Any


def compare_prediction(predicted: Any, measured: Any) -> str:
    """Say how a student's prediction compares with what an exercise measured.

    Args:
        predicted: the prediction: a value, or a dict of values; None (or a dict holding a None)
            means it was not written yet.
        measured: what the experiment found.

    Returns:
        "no prediction written yet", "right", or "not quite: it was <measured>".
    """
    values = predicted.values() if isinstance(predicted, dict) else [predicted]
    if any(value is None for value in values):
        return "no prediction written yet"
    return "right" if predicted == measured else f"not quite: it was {measured!r}"
