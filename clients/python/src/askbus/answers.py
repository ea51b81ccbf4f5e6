"""Answer strings encoded the way Gemini CLI's own ask_user dialog (``AskUserDialog``)
encodes them, so a producer cannot tell a Python UI's answers from the reference's:

- a single-choice question: the chosen option's label, or the "Other" text, trimmed;
- a multi-select question: the chosen labels in option order, then the "Other" text
  (trimmed, if any), joined by ``", "``;
- a yes/no question: ``"Yes"`` or ``"No"``, or the "Other" text, trimmed (Gemini CLI 0.61's
  dialog offers "Other" on yes/no questions too);
- a text question: the text, trimmed;
- and the dialog leaves out every question whose answer trims to nothing (``collect``).

Trimming is JavaScript's ``String.prototype.trim``, which differs from ``str.strip``.

Example::

    q = req.questions
    req.answer(answers.collect({
        0: answers.choice(q[0], "SQLite"),
        1: answers.yesno(True),
        2: answers.multi(q[2], ["Auth", "Logs"], other="metrics "),
    }))
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from .types import Answers

__all__ = ["choice", "collect", "js_trim", "multi", "other", "text", "yesno"]

# ECMAScript WhiteSpace and LineTerminator: what String.prototype.trim strips. Python's
# str.strip() differs: it also strips U+001C..U+001F and U+0085, and keeps U+FEFF.
_JS_WHITESPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_Selection = Union[int, str]


def js_trim(value: str) -> str:
    """JavaScript's ``String.prototype.trim``."""
    return value.strip(_JS_WHITESPACE)


def text(value: str) -> str:
    """A text question's answer: the text, trimmed."""
    return js_trim(value)


def yesno(value: Optional[bool] = None, *, other: Optional[str] = None) -> str:
    """A yes/no question's answer: ``"Yes"``/``"No"``, or instead the "Other" text."""
    if (value is None) == (other is None):
        raise ValueError("give exactly one of value and other")
    if other is not None:
        return js_trim(other)
    return "Yes" if value else "No"


def other(value: str) -> str:
    """A single-choice question answered with the free-text "Other" entry."""
    return js_trim(value)


def _labels(question: Mapping[str, Any]) -> List[str]:
    if question.get("type") == "yesno":
        # The dialog shows a yes/no question as a choice between these two.
        return ["Yes", "No"]
    if question.get("type") != "choice":
        raise ValueError(f"not a choice question: type is {question.get('type')!r}")
    options = question.get("options")
    if not isinstance(options, list):
        raise ValueError("the choice question has no options")
    return [str(opt.get("label")) for opt in options]


def _index(labels: List[str], selected: _Selection) -> int:
    if isinstance(selected, bool):
        raise TypeError("an option is chosen by its label or its index, not a bool")
    if isinstance(selected, int):
        if not 0 <= selected < len(labels):
            raise ValueError(f"option index {selected} is out of range (0..{len(labels) - 1})")
        return selected
    if selected in labels:
        # Labels may repeat; a label chooses the first option that has it, as in the dialog.
        return labels.index(selected)
    raise ValueError(f"{selected!r} is not one of the options {labels!r}")


def choice(
    question: Mapping[str, Any],
    option: Optional[_Selection] = None,
    *,
    other: Optional[str] = None,
) -> str:
    """A single-choice (or yes/no) question's answer: ``option`` (a label or an index) or,
    instead, the "Other" text."""
    labels = _labels(question)
    if question.get("multiSelect"):
        raise ValueError("a multi-select question is answered with answers.multi()")
    if (option is None) == (other is None):
        raise ValueError("give exactly one of option and other")
    if other is not None:
        return js_trim(other)
    assert option is not None
    return str(labels[_index(labels, option)])


def multi(
    question: Mapping[str, Any],
    options: Iterable[_Selection] = (),
    *,
    other: Optional[str] = None,
) -> str:
    """A multi-select question's answer: the chosen options (labels or indices, in any
    order) in option order, then the "Other" text if it is not blank, joined by ``", "``."""
    labels = _labels(question)
    chosen = sorted({_index(labels, o) for o in options})
    parts = [str(labels[i]) for i in chosen]
    if other is not None and js_trim(other):
        parts.append(js_trim(other))
    return ", ".join(parts)


def collect(answers: Answers) -> Dict[str, str]:
    """The answers map as the dialog submits it: string keys, and no entry for a question
    whose answer is blank (the dialog counts those as unanswered)."""
    return {str(k): v for k, v in answers.items() if js_trim(v)}
