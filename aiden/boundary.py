"""Session-boundary detection (pure): does a new user turn continue the session or start a new one?

Aiden's default rule: an explicit flag wins; a turn within
``session_continue_gap_s`` of the last activity continues; one after more than
``session_new_gap_s`` starts a new session; in between, an optional classifier
decides (continue when there is none). Time comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from aiden.config import Config

__all__ = ["BoundaryDecision", "Classifier", "decide_boundary"]

Classifier = Callable[[str, float], bool]
"""``classifier(user_input, idle_seconds) -> True`` when the input starts a new session."""


class BoundaryDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict and why."""

    new_session: bool
    reason: Literal["explicit", "first_turn", "short_gap", "long_gap", "classifier", "default_continue"]
    idle_seconds: float | None = None


def decide_boundary(
    *,
    user_input: str,
    now: float,
    last_activity: float | None,
    config: Config,
    explicit_new: bool | None = None,
    classifier: Classifier | None = None,
) -> BoundaryDecision:
    """Classify a turn. ``last_activity`` is None for an empty session (nothing to rotate)."""
    if explicit_new is not None:
        return BoundaryDecision(new_session=explicit_new, reason="explicit")
    if last_activity is None:
        return BoundaryDecision(new_session=False, reason="first_turn")
    idle = max(0.0, now - last_activity)
    if idle <= config.session_continue_gap_s:
        return BoundaryDecision(new_session=False, reason="short_gap", idle_seconds=idle)
    if idle > config.session_new_gap_s:
        return BoundaryDecision(new_session=True, reason="long_gap", idle_seconds=idle)
    if classifier is not None:
        return BoundaryDecision(new_session=bool(classifier(user_input, idle)), reason="classifier", idle_seconds=idle)
    return BoundaryDecision(new_session=False, reason="default_continue", idle_seconds=idle)
