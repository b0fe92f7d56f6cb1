"""The embedded default summarizer: rule-based extraction, no network.

Seed 001: compaction keeps load-bearing facts and drops repeatable detail.
:class:`ExtractiveSummarizer` does that with plain rules: it keeps the exact
sentences that carry the user's goal, constraints, preferences and corrections,
decisions with their reasons, errors with their resolution, failed
approaches, the open thread, file paths, commands, identifiers and numbers,
and drops raw tool output (only error lines and a tool's first meaningful
line survive). Facts are kept verbatim (whitespace-normalized, clipped)
rather than paraphrased, so they survive any number of re-compactions: a
rolling fold re-parses its own output and keeps the load-bearing lines first.

Output is deterministic and bounded by the request's token budget, filled in
seed 001's priority order: goal, user constraints/preferences/corrections,
decisions, errors + resolution, failed approaches, open thread, files/ids,
then the rest. Within the fact and talk tiers, lines carrying more
information per token go first, whatever their place in a message
(``salience``: rare words within the range, numbers, dates, names; what a
speaker tells of themselves over reactions and questions; a word the hot
window left after the compaction says too counts less); phatic
talk ("Hey Mel!", "Thanks!", "Can't wait!") and junk list lines (a bare path,
a test runner's line, a cut path) are dropped; a turn written as ``Name: ...``
keeps its speaker on every fact taken from it, and is a chat participant's:
its sayings are no constraints or preferences of the user. A chunk summary whose kept
lines say nothing (only files, commands, a step) also gets its newest
informative message and a sentence of its tool work.

Layout: ``extract`` files the items of events and summary text in a
collector, reading tool calls and output with ``tools``; ``salience`` weighs
them; ``selection`` chooses what is kept (dedupe, collapsed step runs,
budget); ``render`` writes it out (history sections, session summary);
``summarizer`` holds the class that runs it all, and the rolling fold.
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
