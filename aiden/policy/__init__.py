"""Compaction policy: pure, synchronous decisions with no I/O, clock or event loop.

Token estimates (``tokens``), when to compact (``triggers``), where to cut (``cutpoints``), summary.md's
text (``summary_md``), the summarizer's deadline (``summarizer_deadline``), tool-result success
(``toolresult``) and payload/credential scrubbing (``scrub``). Time, configuration and model data come
in as arguments, so every function is deterministic and safe to call from any thread or task.
"""

from __future__ import annotations

from aiden.policy.cutpoints import (
    CompactionPlan,
    CutClass,
    CutMeta,
    SkipCompaction,
    classify,
    is_leading_context,
    legal_cut_points,
    plan_compaction,
)
from aiden.policy.scrub import IMAGE_KEYS, scrub_text, strip_screenshot_data
from aiden.policy.tokens import (
    CL100K,
    DEFAULT_PROFILE,
    MESSAGE_OVERHEAD_TOKENS,
    O200K,
    TextFeatures,
    TokenCalibration,
    TokenProfile,
    apply_calibration,
    calibrate,
    estimate_event_tokens,
    estimate_tokens,
    event_tokens,
    profile_for_model,
    text_features,
)
from aiden.policy.triggers import (
    TriggerDecision,
    TriggerInput,
    TriggerReason,
    should_compress,
    trigger_threshold_tokens,
)

__all__ = [
    "CL100K",
    "DEFAULT_PROFILE",
    "IMAGE_KEYS",
    "MESSAGE_OVERHEAD_TOKENS",
    "O200K",
    "CompactionPlan",
    "CutClass",
    "CutMeta",
    "SkipCompaction",
    "TextFeatures",
    "TokenCalibration",
    "TokenProfile",
    "TriggerDecision",
    "TriggerInput",
    "TriggerReason",
    "apply_calibration",
    "calibrate",
    "classify",
    "estimate_event_tokens",
    "estimate_tokens",
    "event_tokens",
    "is_leading_context",
    "legal_cut_points",
    "plan_compaction",
    "profile_for_model",
    "scrub_text",
    "should_compress",
    "strip_screenshot_data",
    "text_features",
    "trigger_threshold_tokens",
]
