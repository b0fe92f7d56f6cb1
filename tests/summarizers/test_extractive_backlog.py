"""A long uncompacted backlog costs the extractive dedupe about linear work (issue: Reliability, finding 2).

Every kept sentence line is a "container" a later line may be absorbed
into; the dedupe used to test each line against every container, so one
maintenance pass over N events did ~N^2/2 substring checks. The check is
counted, not timed: the normalized lines are wrapped in a ``str`` subclass
whose ``__contains__`` counts calls, and 4x the events must cost about 4x
(not 16x) the checks. The output must not change either.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aiden.summarizers.extractive import selection as extractive
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_backlog import backlog

pytestmark = pytest.mark.timeout(60)


class _Counted(str):
    __slots__ = ()
    checks = 0

    def __contains__(self, other: object) -> bool:
        _Counted.checks += 1
        return str.__contains__(self, other)  # type: ignore[arg-type]


def _checks(monkeypatch: pytest.MonkeyPatch, n: int) -> int:
    real = extractive.normalize
    monkeypatch.setattr(extractive, "normalize", lambda text: _Counted(real(text)))
    _Counted.checks = 0
    ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=backlog(n)))
    monkeypatch.setattr(extractive, "normalize", real)
    return _Counted.checks


def test_dedupe_containment_checks_grow_linearly(monkeypatch: pytest.MonkeyPatch) -> None:
    small = _checks(monkeypatch, 400)
    large = _checks(monkeypatch, 1600)
    assert small > 0
    # Against at least one check per event: routine requests now collapse before dedupe, so the
    # small backlog needs almost none (4) and a bare ratio would measure that, not the growth.
    # Quadratic growth would still be ~1.3M checks here.
    assert large <= 5 * max(small, 400), (small, large)


def test_container_index_finds_what_a_plain_scan_finds() -> None:
    # The gram index must pick the same (first) container as scanning them all in order.
    words = ["must", "stay", "under", "5", "mb", "step", "12", "continue", "with", "of", "proj-7", "ab"]
    index = extractive._Containers()
    plain: list[tuple[str, str]] = []
    for i in range(300):
        norm = " ".join(words[(i * 7 + k * 3) % len(words)] for k in range(1 + i % 9))
        found = index.first_containing(norm)
        expected = next((tag for n, tag in plain if norm in n), None)
        assert (found.text if found is not None else None) == expected, norm
        for probe in (norm[1:], norm[:-1], norm[2:-2], f"x{norm}"):
            hit = index.first_containing(probe)
            want = next((tag for n, tag in plain if probe in n), None)
            assert (hit.text if hit is not None else None) == want, probe
        if found is None:
            tag = f"item-{i}"
            index.add(norm, extractive.Item("facts", tag, 1, i))
            plain.append((norm, tag))


def test_backlog_summary_is_deterministic() -> None:
    request = SummaryRequest(purpose="history", events=backlog(800))
    first = ExtractiveSummarizer().summarize_sync(request)
    assert first == ExtractiveSummarizer().summarize_sync(request)
    assert "Continue with step" in first.text
