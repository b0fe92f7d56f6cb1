"""Summarizers: the contract (``protocol``) and its implementations.

* ``extractive`` — the embedded default, :class:`~aiden.ExtractiveSummarizer`: rule-based, offline, deterministic.
* ``llm`` — :class:`~aiden.LiteLLMSummarizer`, any model litellm supports (litellm loads at the first call).
* ``mustkeep`` — the deterministic must-keep check both of them apply.
"""
