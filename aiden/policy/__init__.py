"""Compaction policy: pure, synchronous decisions with no I/O, clock or event loop.

* :mod:`~aiden.policy.tokens`: token estimates without a tokenizer;
* :mod:`~aiden.policy.tokenprofiles`: the estimate's coefficients per
  tokenizer family and which model uses which;
* :mod:`~aiden.policy.calibration`: the run-time correction of estimates from
  provider-reported prompt sizes;
* :mod:`~aiden.policy.triggers`: when to compact;
* :mod:`~aiden.policy.cutpoints`: where to cut the hot window (the plan, split
  turns, skip reasons), built on :mod:`~aiden.policy.boundaries` (which events
  may open the hot window) and :mod:`~aiden.policy.cutsearch` (the token, count
  and progress paths, root input pinning, sticky pins, leading context);
* :mod:`~aiden.policy.scrub`: dropping screenshot payloads before persistence.

Time, configuration and model data come in as arguments, so every function
here is deterministic and safe to call from any thread or task.
"""

from __future__ import annotations

from aiden.policy.boundaries import CutClass, classify, is_leading_context, legal_cut_points
from aiden.policy.calibration import TokenCalibration, apply_calibration, calibrate
from aiden.policy.cutpoints import (
    CompactionPlan,
    CutMeta,
    SkipCompaction,
    plan_compaction,
    prompt_after_compaction_tokens,
)
from aiden.policy.scrub import IMAGE_KEYS, scrub_text, strip_screenshot_data
from aiden.policy.tokenprofiles import CL100K, DEFAULT_PROFILE, O200K, TokenProfile, profile_for_model
from aiden.policy.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TextFeatures,
    estimate_event_tokens,
    estimate_tokens,
    event_tokens,
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
    "prompt_after_compaction_tokens",
    "scrub_text",
    "should_compress",
    "strip_screenshot_data",
    "text_features",
    "trigger_threshold_tokens",
]
