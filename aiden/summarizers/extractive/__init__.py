"""The embedded default summarizer: rule-based, deterministic, offline.

Facts are kept verbatim (whitespace-normalized, clipped), not paraphrased, so
they survive any number of re-compactions; the token budget is filled in seed
001's priority order, and within a tier by information per token.

Layout: ``extract`` files items from events and summary text (tool calls and
output through ``tools``); ``salience`` weighs them; ``selection`` chooses
(dedupe, collapsed step runs, budget); ``render`` writes them out;
``summarizer`` holds the class and the rolling fold.
"""

from __future__ import annotations

from aiden.summarizers.extractive.extract import stated_goal
from aiden.summarizers.extractive.render import render_structured
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer, rolling_fold, summary_must_keep

__all__ = [
    "ExtractiveSummarizer",
    "render_structured",
    "rolling_fold",
    "stated_goal",
    "summary_must_keep",
]
