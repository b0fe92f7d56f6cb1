"""Session-boundary rules (pure: time comes in as arguments)."""

from __future__ import annotations

import pytest

from aiden import Config
from aiden.policy.triggers import decide_boundary

C = Config()


@pytest.mark.parametrize(
    ("idle", "new", "reason"),
    [(0.0, False, "short_gap"), (300.0, False, "short_gap"), (300.5, False, "default_continue"),
     (1800.0, False, "default_continue"), (1800.1, True, "long_gap"), (86400.0, True, "long_gap")],
)
def test_gaps(idle: float, new: bool, reason: str) -> None:
    d = decide_boundary(user_input="x", now=1000.0 + idle, last_activity=1000.0, config=C)
    assert (d.new_session, d.reason, d.idle_seconds) == (new, reason, idle)


def test_explicit_flag_wins_and_first_turn_never_rotates() -> None:
    assert decide_boundary(user_input="x", now=5.0, last_activity=4.9, config=C, explicit_new=True).reason == "explicit"
    d = decide_boundary(user_input="x", now=99999.0, last_activity=None, config=C)
    assert (d.new_session, d.reason) == (False, "first_turn")


def test_classifier_decides_in_the_middle_band_only() -> None:
    seen: list[tuple[str, float]] = []

    def classifier(text: str, idle: float) -> bool:
        seen.append((text, idle))
        return text.startswith("new topic")

    mid = decide_boundary(user_input="new topic: x", now=1000.0, last_activity=0.0, config=C, classifier=classifier)
    short = decide_boundary(user_input="new topic: x", now=10.0, last_activity=0.0, config=C, classifier=classifier)
    assert (mid.new_session, mid.reason) == (True, "classifier")
    assert (short.new_session, short.reason) == (False, "short_gap")
    assert seen == [("new topic: x", 1000.0)]
