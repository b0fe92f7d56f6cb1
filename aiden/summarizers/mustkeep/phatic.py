"""Phatic talk: sentences that carry no fact ("Hey Mel!", "Thanks, Tom!", "Can't wait!") (#38).

Shared by the extractive summarizer (which drops them whatever their place in
a message) and the must-keep check (which never asks a summary to keep one).
A general rule, not a list of phrases: no informative word, or a single one
among greetings, thanks or exclamations. Pure functions of text.
"""

from __future__ import annotations

import re
from typing import Final

from aiden.summarizers.mustkeep.text import content_words
from aiden.summarizers.mustkeep.tokens import has_fact_tokens

# Words that carry no fact by themselves: greetings, thanks, affect, agreement, filler verbs.
# A sentence made of these (plus stopwords) is phatic however long it is.
_LOW_INFORMATION: Final = frozenset(
    {
        "hey", "hiya", "hello", "thanks", "thank", "thx", "cheers", "bye", "goodbye", "congrats",
        "congratulations", "wow", "omg", "haha", "lol", "yay", "great", "awesome", "cool", "nice", "glad",
        "good", "wonderful", "amazing", "fantastic", "lovely", "sweet", "incredible", "super", "neat",
        "brilliant", "perfect", "fun", "really", "totally", "definitely", "absolutely", "exactly", "agree",
        "agreed", "sure", "yeah", "yep", "yup", "okay", "right", "true", "sounds", "sound", "seems", "wait",
        "can't", "cannot", "see", "seeing", "hear", "hearing", "happy", "proud", "lot", "lots", "much", "means",
        "mean", "meant", "word", "words", "kind", "care", "take", "love", "loved", "like", "appreciate",
        "appreciated", "hope", "hoping", "thing", "things", "stuff", "tell", "telling", "know", "knowing",
        "keep", "going", "way", "feel", "feeling", "felt", "guess", "well", "pretty", "always", "got", "get",
        "gets", "gonna", "wanna", "hug", "hugs", "luck", "best", "thought", "thoughts", "mind", "soon", "later",
        "talk", "chat", "catch", "time", "day", "today", "share", "sharing", "excited", "exciting", "inspiring",
        "inspired", "happen", "happened", "buddy", "friend", "dear", "man", "guys", "everyone", "anyway",
        "though", "still", "even", "something", "anything", "everything", "nothing", "look", "looks", "looking",
        "truly", "welcome", "sorry", "him", "her", "his", "hers", "mine", "yours", "ours", "theirs", "myself",
        "yourself", "ourselves", "someone", "anyone", "one", "worries", "worry"
    }
)  # fmt: skip
# Social markers: a sentence of one informative word is phatic when it greets, thanks or exclaims
# ("Hey Mel!", "Thanks, Melanie!"), not when it asks or corrects ("Try again", "No, that's wrong").
_SOCIAL: Final = frozenset(
    {
        "hi", "yo", "ok", "hey", "hiya", "hello", "thanks", "thank", "thx", "cheers", "bye", "goodbye", "congrats",
        "congratulations", "wow", "omg", "haha", "lol", "yay", "great", "awesome", "cool", "nice", "glad",
        "sweet", "wonderful", "amazing", "fantastic", "lovely", "incredible", "brilliant", "welcome", "sorry",
        "wait", "sounds", "proud", "happy", "excited", "exciting", "hugs", "luck", "worries"
    }
)  # fmt: skip
_NUMBER: Final = re.compile(r"\d")
_WORDS: Final = re.compile(r"[^\W\d_]+")
_SPEAKER: Final = re.compile(r"^(?P<who>[A-Z][\w'.-]{0,24}(?: [A-Z][\w'.-]{0,24})?):\s+(?=\S)")
# Labels that open a line of content, not a speaker's turn.
_NOT_SPEAKERS: Final = frozenset(
    {
        "user", "assistant", "system", "tool", "goal", "outcome", "decision", "decided", "constraint",
        "deadline", "requirement", "preference", "correction", "error", "errors", "fix", "resolution",
        "resolved", "note", "notes", "plan", "step", "question", "answer", "result", "results", "summary",
        "update", "warning", "info", "debug", "todo", "files", "file", "commands", "command", "facts", "fact",
        "requests", "open", "thread", "context", "output", "input", "failed", "traceback", "test", "tests",
        "session", "status", "issue", "reason", "cause", "example"
    }
)  # fmt: skip


def split_speaker(text: str) -> tuple[str, str]:
    """``("Name", rest)`` for a turn written as ``"Name: ..."`` (a multi-party chat), else ``("", text)``."""
    match = _SPEAKER.match(text)
    if match is None or match.group("who").casefold() in _NOT_SPEAKERS:
        return "", text
    return match.group("who"), text[match.end() :]


def informative_words(sentence: str) -> list[str]:
    """The sentence's content words that can carry a fact (no greetings, thanks, affect or filler)."""
    return [w for w in content_words(sentence) if w not in _LOW_INFORMATION]


def is_phatic(sentence: str) -> bool:
    """True for a sentence that carries no fact: no informative word, or one among greetings or thanks.

    "Hey Mel!", "Thanks, Melanie!", "Your words mean a lot to me.", "Can't
    wait!", "Sounds great!" — a general rule, not a list of phrases. A
    number or an id is a fact ("Melanie: 5 years already!" is not phatic).
    """
    _who, body = split_speaker(sentence.strip())
    if _NUMBER.search(body) and has_fact_tokens(body):
        return False
    informative = set(informative_words(body))
    if not informative:
        return True
    return len(informative) == 1 and not _SOCIAL.isdisjoint(_WORDS.findall(body.casefold()))
