"""Deterministic must-keep check: facts (constraints, decisions, ids, paths, numbers) a summary
may not silently lose, found with plain rules and appended when a summary lost them.

The sentence primitives live here too: the extractive summarizer must agree
with the check on what an item *is*, so nothing it keeps is appended twice.
"""
