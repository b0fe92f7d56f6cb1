"""LLM-backed summarization through litellm: the only package of aiden that imports litellm,
and only lazily (importing it imports no litellm).
"""
