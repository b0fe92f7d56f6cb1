"""English function words that carry no topic: dropped from a query that has other words.

A natural-language question ("what was it that we decided about the cache?")
is mostly such words, and so is a hypothetical one ("would she likely ...?",
"what might his degree be?"); BM25 gives them little weight, but every one of them
matches most events, which costs time and lets long events that happen to
repeat them outrank the one event holding the topic words.
"""

from __future__ import annotations

from typing import Final

__all__ = ["STOPWORDS", "is_stopword"]

_WORDS: Final = """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can cannot could couldn did didn do does doesn doing don down during each else ever
    few for from further had hadn has hasn have haven having he her here hers herself him himself his how i
    if in into is isn it its itself just let ll me more most mustn my myself no nor not now of off on once
    only or other ought our ours ourselves out over own re same shall shan she should shouldn so some such
    than that the their theirs them themselves then there these they this those through to too under until
    up us very was wasn we were weren what when where which while who whom whose why will with won would
    wouldn ve you your yours yourself yourselves s t d m o y
    also anything something thing things stuff get got gets getting go going gone make made one ones
    really please thanks thank ok okay yes yeah hey hi hello tell told say said says know think thought
    remember recall mean meant like want wanted need needed use used way whatever
    likely unlikely probably possibly perhaps maybe might must
"""

STOPWORDS: Final = frozenset(_WORDS.split())
"""Lower-case; matched against a word as typed, case-folded."""


def is_stopword(word: str) -> bool:
    """True if ``word`` (any case) is a function word or conversational filler."""
    return word.casefold() in STOPWORDS
