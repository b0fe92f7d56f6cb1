"""What the ``aiden`` command says on stderr: progress of its long work (``export``, ``doctor``) and problems.

stdout carries the command's output (an export is piped into a file), so
progress and problems go to stderr. On a terminal one line is rewritten in place; into a
file or pipe it prints at most one line per tenth of the work (at most 11
lines however large the root), so a log stays readable.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress", "progress_enabled", "report_problems"]


def report_problems(command: str, problems: list[str]) -> int:
    """Say each problem on stderr, one line each; the exit code: 1 if there was any, else 0."""
    for problem in problems:
        print(f"aiden {command}: {' '.join(problem.split())}", file=sys.stderr)
    return 1 if problems else 0


def progress_enabled(flag: bool | None, stream: TextIO | None = None) -> bool:
    """``--progress`` / ``--no-progress`` as given, else on when ``stream`` (stderr) is a terminal."""
    if flag is not None:
        return flag
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Progress:
    """Counts ``done`` of ``total`` units of ``what`` (e.g. ``"chunk files"``) under ``label``."""

    def __init__(self, label: str, what: str, total: int, *, stream: TextIO | None = None) -> None:
        self._label = label
        self._what = what
        self._total = total
        self._done = 0
        self._enabled = total > 0
        self._stream = sys.stderr if stream is None else stream
        self._tty = self._enabled and progress_enabled(None, self._stream)
        self._shown = -1  # the last step printed: a hundredth on a terminal, else a tenth

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""
        self._done = min(self._total, self._done + n)
        if not self._enabled:
            return
        step = self._done * (100 if self._tty else 10) // self._total
        if step == self._shown:
            return
        self._shown = step
        text = f"{self._label}: {self._done}/{self._total} {self._what}"
        if self._tty:
            self._stream.write("\r" + text + ("\n" if self._done == self._total else ""))
        else:
            self._stream.write(text + "\n")
        self._stream.flush()
