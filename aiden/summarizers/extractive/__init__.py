"""The embedded default summarizer: rule-based, deterministic, offline.

Facts are kept verbatim (whitespace-normalized, clipped), not paraphrased, so
they survive any number of re-compactions; the token budget is filled in seed
001's priority order, and within a tier by information per token.

Layout: ``extract`` files items from events and summary text (tool calls and
output through ``tools``, the Goal through ``goal``); ``salience`` weighs them; ``selection`` chooses
(dedupe, collapsed step runs, budget) and writes them out; ``summarizer``
holds the class and the rolling fold.
"""
