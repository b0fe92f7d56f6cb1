"""Compaction policy: pure, synchronous decisions with no I/O, clock or event loop.

Token estimates (``tokens``), when to compact (``triggers``), where to cut (``cutpoints``), summary.md's
text (``summary_md``), the summarizer's deadline (``summarizer_deadline``), tool-result success
(``toolresult``) and payload/credential scrubbing (``scrub``). Time, configuration and model data come
in as arguments, so every function is deterministic and safe to call from any thread or task.
"""
