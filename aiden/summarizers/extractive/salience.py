"""Information value: what a later question could need from a sentence, and talk that carries none.

The facts a later question asks about are a few sentences among social glue,
rarely the first of a turn: kept lines are ranked by information per token
(rare words within the range; numbers, dates and names weigh most) and by
whether the speaker tells of themselves. Pure functions of text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final

from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.mustkeep.classify import informative_words, is_phatic, split_speaker
from aiden.summarizers.mustkeep.text import content_words

_MONTH: Final = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|jun(?:e)?|jul(?:y)?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|yesterday|tomorrow|weekend|last (?:week|month|year)|next (?:week|month|year)|"
    r"\d{1,2}(?:st|nd|rd|th)? may|may \d{1,2}|\d{4}-\d\d-\d\d)\b",
    re.IGNORECASE,
)
# A capitalized word inside a sentence: a name of a person, place or thing.
_NAME: Final = re.compile(r"(?<=[\s,(\"'])[A-Z][\w'-]*[a-z][\w'-]*")


def shown_words(texts: Iterable[str]) -> set[str]:
    """The informative words of ``texts`` (the hot window after a compaction: the prompt shows them)."""
    return {w for text in texts for w in informative_words(text)}


def names_a_date(text: str) -> bool:
    """True for text naming a date or a day ("8 May, 2023", "last Saturday"): when something happened."""
    return _MONTH.search(text) is not None


_RELATIVE: Final = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|the other day|recently|lately|"
    r"(?:last|next|this|past|coming) (?:few |couple of )?(?:night|morning|evening|weekend|week|month|year|"
    r"spring|summer|fall|autumn|winter|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"mon|tues?|wed|thu(?:rs?)?|fri|sat|sun)s?|"
    r"(?:\d+|a|an|one|two|three|four|five|six|few|couple of|several) (?:days?|weeks?|months?|years?) ago)\b",
    re.IGNORECASE,
)


def names_relative_date(text: str) -> bool:
    """True for text whose time is relative to when it was said ("yesterday", "last week", "3 days ago")."""
    return _RELATIVE.search(text) is not None


def day_of(timestamp: float | None) -> str:
    """The UTC calendar day of ``timestamp`` as a chat writes it ("8 May, 2023"); empty for none."""
    if timestamp is None:
        return ""
    day = datetime.fromtimestamp(timestamp, tz=UTC)
    return f"{day.day} {day:%B}, {day.year}"


_MONTHS: Final = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DAY: Final = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR: Final = r"(?:19|20)\d\d(?!\d)"
_CALENDAR_DATE: Final = re.compile(
    rf"(?<!\d)(?:{_DAY}\s+(?:of\s+)?{_MONTHS},?\s+{_YEAR}|{_MONTHS}\s+{_DAY},?\s+{_YEAR}"
    rf"|{_YEAR}[-/]\d{{1,2}}[-/]\d{{1,2}}(?!\d)|\d{{1,2}}[-/]\d{{1,2}}[-/]{_YEAR})"
)


def stated_date(text: str) -> str:
    """The first calendar date ``text`` writes out ("17 July, 2023", "July 17th 2023", "2023-07-17",
    "2023/07/17"), as written; empty if none. Month names capitalised, so the verb "may" is no date."""
    found = _CALENDAR_DATE.search(text)
    return found.group(0) if found else ""


# What a word is worth in a summary when the hot window that follows it says it too.
_SHOWN_WEIGHT: Final = 0.3


class Rarity:
    """Inverse document frequency of words over one range's sentences: a word said everywhere says little."""

    __slots__ = ("_df", "_n", "_shown")

    def __init__(self, texts: Iterable[str], *, shown: frozenset[str] = frozenset()) -> None:
        said = [set(informative_words(text)) for text in texts]
        self._n = len(said)
        self._df = Counter(word for words in said for word in words)
        self._shown = shown  # words the prompt shows verbatim anyway (:func:`shown_words`)

    def idf(self, word: str) -> float:
        idf = math.log((self._n + 1) / (self._df.get(word, 0) + 0.5))
        return idf * _SHOWN_WEIGHT if word in self._shown else idf

    def information(self, body: str) -> float:
        """Information of ``body`` (a sentence without its speaker): rare informative words, plus
        numbers, dates and names."""
        # Summed in sorted order: floats added in a set's order (which follows the hash seed) differ
        # in their last bits from run to run, and a tie broken by them made summaries differ too.
        words = sorted(set(informative_words(body)))
        score = sum(max(0.2, self.idf(w)) for w in words)
        score += 3.0 * len(set(re.findall(r"\d+(?:[.:/,-]\d+)*", body)))
        score += 3.0 * len(set(m.group(0).casefold() for m in _MONTH.finditer(body)))
        score += 3.0 * len({m.group(0) for m in _NAME.finditer(body)})
        return score

    def density(self, text: str) -> float:
        """Information per token (a line is charged at least 12 tokens: it has overhead), weighed
        up when the speaker tells of themselves (what a later question asks about)."""
        _who, body = split_speaker(text)
        weight = 1.0 if tells_of_self(body) else 0.6
        return self.information(body) * weight / max(12, estimate_tokens(text))


_FIRST_PERSON: Final = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|our|us)\b", re.IGNORECASE)
_SECOND_PERSON: Final = re.compile(r"\b(?:you|you're|you've|you'd|you'll|your|yours)\b", re.IGNORECASE)


def tells_of_self(body: str) -> bool:
    """True for a sentence (without its speaker) that tells of its speaker's own life or work: first
    person, no "you", no question ("I adopted a beagle last Sunday", "we moved the cache to Redis")."""
    return bool(_FIRST_PERSON.search(body)) and not _SECOND_PERSON.search(body) and not body.rstrip().endswith("?")


def addresses_listener(body: str) -> bool:
    """True for a sentence (without its speaker) said to the listener ("You're so adaptable!", "Sorry to
    hear about your job"): a remark on them, no fact of the speaker's."""
    return _SECOND_PERSON.search(body) is not None


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
    """True for a list entry that tells a reader nothing by itself: a bare path, a test runner's
    line, a line ending in a path cut mid-word, a line of one content word, or phatic talk."""
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
