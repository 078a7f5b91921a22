"""Verdicts for the notebooks' exercises: not answered yet, right, or not right yet with a hint.

A check cell prints one `Verdict`. The answer cell holds placeholders (`None`) that Run All leaves
in place, so an untouched notebook says "not answered yet"; an answer gets a specific verdict and
a hint, never a bare `AssertionError`.

A prediction exercise keeps its answer: its experiment cell starts with `prediction_recorded`, which
prints one line asking for the prediction (`PREDICT_FIRST`) and lets nothing run while the answer
cell still holds a placeholder, so neither the committed notebook nor a Run All shows the result
before the student has predicted it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal
from collections.abc import Callable, Mapping

Hint = str | Callable[[Any], str]
"""A hint: a text, or a function of the wrong answer that returns one (a hint for that mistake)."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a check says about an answer.

    Attributes:
        state: `unanswered`, `right` or `wrong`.
        message: what was found, and for a wrong answer a hint.
    """

    state: Literal["unanswered", "right", "wrong"]
    message: str

    @property
    def right(self) -> bool:
        """True when the answer is right."""
        return self.state == "right"

    def __str__(self) -> str:
        label = {"unanswered": "not answered yet", "right": "right", "wrong": "not right yet"}[self.state]
        return f"{label}: {self.message}"

    def __repr__(self) -> str:
        return str(self)


def unanswered(answer: Any) -> bool:
    """True when the answer still holds a placeholder (`None` or `...`), at any depth."""
    if answer is None or answer is Ellipsis:
        return True
    if isinstance(answer, Mapping):
        return any(unanswered(value) for value in answer.values())
    if isinstance(answer, (list, tuple)):
        return any(unanswered(value) for value in answer)
    return False


PREDICT_FIRST = "Record your prediction above first"
"""The start of the one line an experiment cell prints while its prediction is not recorded."""


def prediction_recorded(prediction: Any) -> bool:
    """Whether an experiment may reveal its result: True once `prediction` holds no placeholder.

    While it does, prints one line asking for it and returns False, so the experiment cell shows
    that line instead of the answer.

    Example:
        >>> prediction_recorded({"revision": None})
        Record your prediction above first: replace each None in the answer cell, run it, then run this cell.
        False
    """
    if unanswered(prediction):
        print(f"{PREDICT_FIRST}: replace each None in the answer cell, run it, then run this cell.")
        return False
    return True


def not_answered(what: str) -> Verdict:
    """The verdict for an answer cell left as it was; `what` says what to fill in."""
    return Verdict("unanswered", what)


def right(why: str) -> Verdict:
    """The verdict for a right answer; `why` says what it shows."""
    return Verdict("right", why)


def wrong(what: str, hint: str) -> Verdict:
    """The verdict for a wrong answer: what was found, and a hint towards the right one."""
    return Verdict("wrong", f"{what}. Hint: {hint}")


def check_prediction(predicted: Mapping[str, Any], measured: Mapping[str, Any] | None, *,
                     hints: Mapping[str, Hint], explanation: str) -> Verdict:
    """Compare a prediction with what an experiment measured, figure by figure.

    Args:
        predicted: the student's figures by name (placeholders `None` until answered).
        measured: the experiment's figures under the same names; None while the experiment has not
            run since the prediction was recorded (it waits for the prediction).
        hints: per name, a hint (or a function of the predicted value giving one) for a miss.
        explanation: why the measured figures are what they are (shown with a right answer).

    Returns:
        Not answered while any placeholder is left; right when every figure matches (`same`: "3",
        "three" and 3 are one figure, "Vegan" and "vegan" one word); otherwise
        wrong, naming each figure missed (predicted and measured) with its hint.
    """
    if measured is None:
        if isinstance(predicted, Mapping) and unanswered(predicted):
            return _placeholders_left(predicted)
        return not_answered("your prediction is recorded: run the experiment cell, then this check")
    if set(predicted) != set(measured):
        missing = sorted(set(measured) - set(predicted))
        extra = sorted(set(predicted) - set(measured))
        return wrong(f"the prediction names {sorted(predicted)}; the experiment measures {sorted(measured)}",
                     f"keep the names of the answer cell (missing: {missing}, unknown: {extra})")
    if unanswered(predicted):
        return _placeholders_left(predicted)
    misses = []
    for name, value in predicted.items():
        if same(value, measured[name]):
            continue
        hint = hints.get(name, "run the experiment cell again and read its table")
        # A hint function compares numbers: "7" reaches it as 7.
        said = _as_number(value) if _is_number(measured[name]) else value
        if _is_number(measured[name]) and not _is_number(said):
            text = f"write a number, not {value!r}"
        else:
            text = hint(said) if callable(hint) else hint
        misses.append(f"{name}: you predicted {value!r}, it is {measured[name]!r} ({text})")
    if not misses:
        return right(explanation)
    return Verdict("wrong", "; ".join(misses))


_NUMBER_WORDS = {word: number for number, word in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve"))} | {"none": 0}
"""Counts a student may write out in words ("none" as well as "zero")."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_number(value: Any) -> Any:
    """A number written as text ("3", " 3.0 ", "three") as that number; anything else unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip().casefold()
    if text in _NUMBER_WORDS:
        return _NUMBER_WORDS[text]
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return value


def whole_number(answer: Any) -> int | None:
    """The whole number an answer means (2800, 2800.0, "2800", "2,800", "2800 characters"), or None.

    Example:
        >>> whole_number("2,800 characters"), whole_number(2800.5), whole_number(True)
        (2800, None, None)
    """
    if isinstance(answer, str):
        words = answer.replace(",", "").replace("_", "").split()
        unit = len(words) == 2 and words[1].casefold() in ("characters", "chars", "chars.")
        answer = _as_number(words[0]) if len(words) == 1 or unit else answer
    if not _is_number(answer) or answer != int(answer):
        return None
    return int(answer)


def same(predicted: Any, measured: Any) -> bool:
    """Whether a prediction says what was measured, judged on the idea rather than the spelling.

    A number may be written as text ("3", "three"); text matches whatever its capitals and spaces
    ("Vegan" for "vegan"); a mapping matches name by name. A bool is never a number here: True is
    not a prediction of 1.

    Example:
        >>> same({"value": " Vegan", "events": "one"}, {"value": "vegan", "events": 1})
        True
    """
    if isinstance(measured, Mapping):
        return (isinstance(predicted, Mapping) and set(predicted) == set(measured)
                and all(same(predicted[name], measured[name]) for name in measured))
    if _is_number(measured):
        value = _as_number(predicted)
        return _is_number(value) and value == measured
    if isinstance(measured, str) and isinstance(predicted, str):
        return " ".join(predicted.split()).casefold() == " ".join(measured.split()).casefold()
    return bool(predicted == measured) and type(predicted) is type(measured)


def _placeholders_left(predicted: Mapping[str, Any]) -> Verdict:
    left = [name for name, value in predicted.items() if unanswered(value)]
    names = " and ".join(repr(name) for name in left)
    # The same words as before prediction_recorded existed: committed outputs of every notebook show them.
    return not_answered(f"replace the None of {names} with your prediction, then run this cell again")
