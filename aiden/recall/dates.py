"""Dates written in a recall query, as periods of event time (pure: no clock, no I/O).

"What did she adopt in April 2022?" or "what happened on 9 November, 2022?"
name a time the words of the events do not hold: when something was said is
the event's timestamp. :func:`query_periods` finds such dates and turns each
into a period of Unix seconds (UTC) in which the events that talk about it
were probably written: from the start of the day, month or year to a week
after its end (people tell what they did in the days after), a day earlier
for a single day (time zones). The ranking favours matching events inside a
period; it filters nothing.

Recognised, English month names capitalised (so the verb "may" is no date):
``9 November 2022``, ``9th November, 2022``, ``November 9, 2022``,
``November 2022`` and a year alone (``1900``-``2099``).
"""

from __future__ import annotations

import calendar
import re
from typing import Final

__all__ = ["query_periods"]

_MONTHS: Final = {name: i for i, name in enumerate(calendar.month_name) if name}
_MONTH: Final = "|".join(_MONTHS)
_DAY: Final = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR: Final = r"((?:19|20)\d\d)(?!\d)"
_PATTERNS: Final = (
    re.compile(rf"(?<!\d){_DAY}\s+(?:of\s+)?({_MONTH}),?\s+{_YEAR}"),  # 9 November, 2022
    re.compile(rf"\b({_MONTH})\s+{_DAY},?\s+{_YEAR}"),  # November 9, 2022
    re.compile(rf"\b({_MONTH}),?\s+{_YEAR}"),  # November 2022
    re.compile(rf"(?<![\d.]){_YEAR}"),  # 2022
)
_DAY_S: Final = 86_400.0
_AFTER: Final = 7 * _DAY_S
"""How long after a period events may still tell of it."""
_MAX_PERIODS: Final = 4


def _period(year: int, month: int | None, day: int | None) -> tuple[float, float] | None:
    if month is None:
        return calendar.timegm((year, 1, 1, 0, 0, 0)), calendar.timegm((year + 1, 1, 1, 0, 0, 0)) + _AFTER
    if day is None:
        start = calendar.timegm((year, month, 1, 0, 0, 0))
        end = calendar.timegm((year + month // 12, month % 12 + 1, 1, 0, 0, 0))
        return float(start), end + _AFTER
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    start = calendar.timegm((year, month, day, 0, 0, 0))
    return start - _DAY_S, start + _DAY_S + _AFTER


def query_periods(query: str) -> list[tuple[float, float]]:
    """The periods (start, end in Unix seconds, UTC) of the dates written in ``query``, at most four.

    Each date counts once, at its most precise reading: ``November 9, 2022`` is
    that day, not also November or 2022.
    """
    taken: list[tuple[int, int]] = []
    out: list[tuple[float, float]] = []
    for kind, pattern in enumerate(_PATTERNS):
        for found in pattern.finditer(query):
            span = found.span()
            if any(a < span[1] and span[0] < b for a, b in taken):
                continue
            taken.append(span)
            groups = found.groups()
            if kind == 0:
                period = _period(int(groups[2]), _MONTHS[groups[1]], int(groups[0]))
            elif kind == 1:
                period = _period(int(groups[2]), _MONTHS[groups[0]], int(groups[1]))
            elif kind == 2:
                period = _period(int(groups[1]), _MONTHS[groups[0]], None)
            else:
                period = _period(int(groups[0]), None, None)
            if period is not None and period not in out:
                out.append(period)
    return out[:_MAX_PERIODS]
