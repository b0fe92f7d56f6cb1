"""Run-time calibration: a per-model correction of the token estimate from provider-reported sizes.

The fitted :class:`~aiden.policy.tokenprofiles.TokenProfile` coefficients
leave a residual, model-specific bias (and a prompt carries parts the
estimate never sees). :class:`TokenCalibration` removes it by learning
``reported / estimated`` from the prompt sizes the provider reports.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

__all__ = [
    "BudgetCalibration",
    "TokenCalibration",
    "apply_calibration",
    "calibrate",
    "checked_tokens",
    "observe",
]

_MIN_FACTOR: Final = 0.5
_MAX_FACTOR: Final = 2.0


class TokenCalibration(msgspec.Struct, frozen=True):
    """Per-model correction of the estimate, learned from provider-reported prompt sizes.

    ``factor`` multiplies estimates; ``samples`` counts the observations folded in.
    """

    factor: float = 1.0
    samples: int = 0


def _clamp(value: float) -> float:
    return min(_MAX_FACTOR, max(_MIN_FACTOR, value))


def calibrate(
    cal: TokenCalibration, *, estimated: int, reported: int, weight: float = 0.2
) -> TokenCalibration:
    """Fold one observation (our estimate vs. the provider's prompt tokens) into ``cal``.

    An exponential moving average of ``reported / estimated`` with ``weight`` on
    the new sample; the first sample replaces the neutral start value so one
    observation already corrects a large bias. Ratios and the result are
    clamped to [0.5, 2.0]: a prompt the estimate did not cover (system prompt,
    tool schemas) must not teach a wild factor. Observations with a
    non-positive side are ignored (``cal`` is returned unchanged).
    """
    if not 0.0 < weight <= 1.0:
        raise ValueError(f"weight must be in (0, 1], got {weight!r}")
    if estimated <= 0 or reported <= 0:
        return cal
    ratio = _clamp(reported / estimated)
    factor = ratio if cal.samples == 0 else cal.factor + weight * (ratio - cal.factor)
    return TokenCalibration(factor=_clamp(factor), samples=cal.samples + 1)


def apply_calibration(tokens: int, cal: TokenCalibration) -> int:
    """``tokens`` corrected by ``cal`` (rounded, never negative)."""
    return max(0, round(tokens * cal.factor))


class BudgetCalibration(msgspec.Struct, frozen=True):
    """What the budget check learned from provider-reported prompt sizes: the bias and its spread.

    ``factor`` is an average of ``reported / estimated`` and ``spread`` an
    average of how far one observation falls from it (the estimate's error on
    this content); :func:`checked_tokens` adds two spreads as the margin.
    """

    factor: float = 1.0
    spread: float = 0.0
    samples: int = 0


def observe(
    cal: BudgetCalibration, *, estimated: int, reported: int, weight: float = 0.2
) -> BudgetCalibration:
    """Fold one observation into ``cal`` (non-positive sides are ignored, ratios clamped to [0.5, 2])."""
    if not 0.0 < weight <= 1.0:
        raise ValueError(f"weight must be in (0, 1], got {weight!r}")
    if estimated <= 0 or reported <= 0:
        return cal
    ratio = _clamp(reported / estimated)
    if cal.samples == 0:
        return BudgetCalibration(factor=ratio, spread=0.0, samples=1)
    error = abs(ratio - cal.factor)
    factor = _clamp(cal.factor + weight * (ratio - cal.factor))
    # An error larger than the spread counts in full: one undercount is reason enough to widen it.
    spread = error if error > cal.spread else cal.spread + weight * (error - cal.spread)
    return BudgetCalibration(factor=factor, spread=spread, samples=cal.samples + 1)


def checked_tokens(estimated: int, cal: BudgetCalibration) -> int:
    """The size the budget check holds a prompt to: ``estimated`` corrected with its margin, never less."""
    if cal.samples == 0:
        return estimated
    return max(estimated, math.ceil(estimated * (cal.factor + 2 * cal.spread)))
