"""Information value: what a later question could need from a sentence, and talk that carries none (#38).

A chunk of real conversation is mostly social glue ("Hey Mel!", "Thanks, your
words mean a lot", "Can't wait!"); the facts a later question asks about
("I love fantasy and sci-fi movies", "the concert is on 12 May") are a few
sentences among them, rarely the first of a turn. Kept lines are ranked by
the information they carry per token (rare content words within the range,
numbers, dates and names), and lines with at most one informative word are
phatic: dropped, whatever their position. Pure functions of text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Final

from aiden.summarizers.extractive.tokens import estimate_tokens
from aiden.summarizers.mustkeep import content_words, has_fact_tokens

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
        "yourself", "ourselves", "someone", "anyone", "one"
    }
)  # fmt: skip
# Social markers: a sentence of one informative word is phatic when it greets, thanks or exclaims
# ("Hey Mel!", "Thanks, Melanie!"), not when it asks or corrects ("Try again", "No, that's wrong").
_SOCIAL: Final = frozenset(
    {
        "hi", "yo", "ok", "hey", "hiya", "hello", "thanks", "thank", "thx", "cheers", "bye", "goodbye", "congrats",
        "congratulations", "wow", "omg", "haha", "lol", "yay", "great", "awesome", "cool", "nice", "glad",
        "sweet", "wonderful", "amazing", "fantastic", "lovely", "incredible", "brilliant", "welcome", "sorry",
        "wait", "sounds", "proud", "happy", "excited", "exciting", "hugs", "luck"
    }
)  # fmt: skip
_NUMBER: Final = re.compile(r"\d")
_WORDS: Final = re.compile(r"[^\W\d_]+")
_MONTH: Final = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|jun(?:e)?|jul(?:y)?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|yesterday|tomorrow|weekend|last (?:week|month|year)|next (?:week|month|year)|"
    r"\d{1,2}(?:st|nd|rd|th)? may|may \d{1,2}|\d{4}-\d\d-\d\d)\b",
    re.IGNORECASE,
)
# A capitalized word inside a sentence: a name of a person, place or thing.
_NAME: Final = re.compile(r"(?<=[\s,(\"'])[A-Z][\w'-]*[a-z][\w'-]*")
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


def names_a_date(text: str) -> bool:
    """True for text naming a date or a day ("8 May, 2023", "last Saturday"): when something happened."""
    return _MONTH.search(text) is not None


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


class Rarity:
    """Inverse document frequency of words over one range's sentences: a word said everywhere says little."""

    __slots__ = ("_df", "_n")

    def __init__(self, texts: Iterable[str]) -> None:
        self._df: Counter[str] = Counter()
        self._n = 0
        for text in texts:
            self._n += 1
            self._df.update(set(informative_words(text)))

    def idf(self, word: str) -> float:
        return math.log((self._n + 1) / (self._df.get(word, 0) + 0.5))

    def information(self, text: str) -> float:
        """Information of ``text``: rare informative words, plus numbers, dates and names."""
        _who, body = split_speaker(text)
        words = set(informative_words(body))
        score = sum(max(0.2, self.idf(w)) for w in words)
        score += 1.5 * len(set(re.findall(r"\d+(?:[.:/,-]\d+)*", body)))
        score += 1.5 * len(set(m.group(0).casefold() for m in _MONTH.finditer(body)))
        score += 1.0 * len({m.group(0) for m in _NAME.finditer(body)})
        return score

    def density(self, text: str) -> float:
        """Information per token (short lines are charged as at least 12 tokens: a line has overhead)."""
        return self.information(text) / max(12, estimate_tokens(text))


_LABEL: Final = re.compile(r"^(?:[A-Z][\w ()'-]{0,30}:\s+)")
_BARE_PATH: Final = re.compile(
    r"^[`'\"]?(?:[\w.-]+/)+[\w.-]*[`'\"]?(?::\d+)?$|^[`'\"]?[\w-]+\.[A-Za-z]{1,5}[`'\"]?(?::\d+)?$"
)
_RUNNER: Final = re.compile(
    r"^[=\-\s]*(?:\d+ (?:passed|failed|errors?|skipped|xfailed|warnings?)\b|(?:PASSED|FAILED|ERROR|OK|ok)\b\W*$|"
    r"collected \d+ items?|[\w/.-]+::[\w\[\]:.-]+(?:\s+(?:PASSED|FAILED|ERROR|SKIPPED))?\s*(?:\[\s*\d+%\])?$|"
    r"[.FEsx]+\s*(?:\[\s*\d+%\])?$|Ran \d+ tests? in)"
)
_CUT_PATH: Final = re.compile(r"(?:^|\s)[`'\"]?(?:[\w.-]+/)+[\w-]{1,3}…?$")


def is_junk_line(text: str) -> bool:
    """True for a list entry that tells a reader nothing by itself.

    A bare path (the Files line lists paths), a test runner's line ("PASSED",
    "3 passed in 0.2s", "tests/a.py::test_b PASSED"), a line ending in a path
    cut mid-word, a line of one content word, or phatic talk.
    """
    _who, body = split_speaker(text.strip())
    body = body.strip().strip("`").strip()
    if not _BARE_PATH.match(body):
        body = _LABEL.sub("", body).strip().strip("`").strip()
    if not body:
        return True
    if _BARE_PATH.match(body) or _RUNNER.match(body):
        return True
    if _CUT_PATH.search(body) and not re.search(r"\.\w{1,5}…?$", body):
        return True
    # A one-word line ("STRATEGY:", "Done.") says nothing without the message it came from.
    return len(content_words(body)) <= 1 or is_phatic(body)
