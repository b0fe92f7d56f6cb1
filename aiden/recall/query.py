"""Pure text handling of the recall index: CJK segmentation, safe FTS5 queries, stopwords, dates, snippets.

* FTS5's ``unicode61`` keeps a run of Chinese characters as one token, so :func:`index_text` puts
  U+200B (a separator that :func:`display_text` can remove again) around every CJK character.
* User text is never FTS5 syntax: every term is a quoted phrase (a CJK run the phrase of its
  characters), so operators, column filters and parentheses cannot change a query's meaning.
* :func:`content_terms` drops English function words (:data:`STOPWORDS`) from a query that has
  other words: they match most events and let long events outrank the one holding the topic.
* :func:`query_periods` turns dates written in a question into periods of event timestamps (UTC),
  which the ranking favours without filtering. Pure: no clock.
"""

from __future__ import annotations

import calendar
import collections
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import msgspec

__all__ = [
    "MATCH_REGION",
    "MAX_PAIRS",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "STOPWORDS",
    "Term",
    "bigram_terms",
    "content_terms",
    "display_text",
    "index_text",
    "match_finder",
    "or_expression",
    "query_periods",
    "query_terms",
    "snippet",
    "truncate",
    "word_terms",
]

MAX_QUERY_CHARS: Final = 1000
"""Longer queries are cut to this many characters before they are split into terms."""
MAX_TERMS: Final = 12
"""Most words of one query ranked by (the rarest in the index win); bounds the work per search."""
MAX_PAIRS: Final = 3
"""Most adjacent-word phrases added to a query's terms."""
MATCH_REGION: Final = 240
"""Characters of text a snippet's match is chosen in (:func:`match_finder`): a few sentences."""
_MAX_RAW_TERMS: Final = 64
"""Most distinct words of a query looked at before stopwords are dropped; also the most terms
:func:`content_terms` gives, of which a search ranks by the :data:`MAX_TERMS` rarest."""

ZWSP: Final = "\u200b"
ELLIPSIS: Final = "…"

# Scripts whose words are not separated by spaces (plus Hangul, which attaches
# particles to nouns): every character is made a token of its own.
_CJK_RANGES: Final = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK Radicals Supplement, Kangxi Radicals
    "\u3005-\u3007"  # iteration mark, closing mark, ideographic zero
    "\u3021-\u3029"  # Hangzhou numerals
    "\u3031-\u3035\u303b\u303c"  # kana repeat marks, vertical iteration marks
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f"  # Bopomofo
    "\u3131-\u318f"  # Hangul Compatibility Jamo
    "\u31a0-\u31bf"  # Bopomofo Extended
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7ff"  # Hangul Syllables, Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uff66-\uffdc"  # halfwidth Katakana and Hangul
    "\U00020000-\U0003ffff"  # CJK Extensions B and later
)
_CJK_CHAR: Final = re.compile(f"[{_CJK_RANGES}]")
_CJK_RUN_OR_OTHER: Final = re.compile(f"([{_CJK_RANGES}]+)|([^{_CJK_RANGES}]+)")
_WS: Final = re.compile(r"\s+")
_SPACED: Final = f"{ZWSP}\\g<0>{ZWSP}"
_HIDDEN: Final = "\x1e"  # a separator to unicode61; what follows it in a stored text is never shown
_JSON_ESCAPE: Final = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
# Starts only where a word starts: a long run of word characters is scanned once, not once per character.
_ESCAPED_SPAN: Final = re.compile(rf"(?<![^\W_])[^\W_]*(?:{_JSON_ESCAPE.pattern}[^\W_]*)+")
_SIMPLE_ESCAPES: Final = {"\"": "\"", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WORD: Final = re.compile(r"[^\W_]+")
_WORD_CHAR: Final = re.compile(r"[^\W_]")
# A raw Windows path of two names or more (``C:\new\temp``): its backslashes separate names; read
# as JSON escapes, they would add junk words ("ew", "emp"). JSON writes the same path ``C:\\new``,
# not matched here; nor is a one-letter label before an escape (``"A:\nRestart"``), whose word counts.
_WINDOWS_PATH: Final = re.compile(r"(?<![^\W_])[A-Za-z]:\\(?!\\)[^\s\"'<>|\\]+\\[^\s\"'<>|]*")
_JSON_ESC: Final = re.compile(r"\\u001[bB]")
"""ESC written as a JSON escape: tools' JSON output carries colour codes this way."""
_SPACED_CJK: Final = re.compile(f"{ZWSP}([{_CJK_RANGES}]){ZWSP}")
# ANSI CSI (colours, cursor moves) and OSC (titles, links: ended by BEL or ESC \) sequences.
_TERMINAL_ESCAPE: Final = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\))")

# English function words and conversational filler that carry no topic.
_STOPWORD_TEXT: Final = """
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

STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
"""Lower-case; matched against a word as typed, case-folded."""


# Dates written in a query.
_MONTHS: Final = {name: i for i, name in enumerate(calendar.month_name) if name}
_MONTH: Final = "|".join(_MONTHS)
_DAY: Final = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR: Final = r"((?:19|20)\d\d)(?!\d)"
# Each pattern with the groups of its year, month and day (0: not written), most precise first.
_PATTERNS: Final = (
    (re.compile(rf"(?<!\d){_DAY}\s+(?:of\s+)?({_MONTH}),?\s+{_YEAR}"), 3, 2, 1),  # 9 November, 2022
    (re.compile(rf"\b({_MONTH})\s+{_DAY},?\s+{_YEAR}"), 3, 1, 2),  # November 9, 2022
    (re.compile(rf"\b({_MONTH}),?\s+{_YEAR}"), 2, 1, 0),  # November 2022
    (re.compile(rf"(?<![\d.]){_YEAR}"), 1, 0, 0),  # 2022
)
_DAY_S: Final = 86_400.0
_AFTER: Final = 7 * _DAY_S
"""How long after a period events may still tell of it."""
_MAX_PERIODS: Final = 4


def _period(year: int, month: int | None, day: int | None) -> tuple[float, float] | None:
    if month is None:
        return calendar.timegm((year, 1, 1, 0, 0, 0)), calendar.timegm((year + 1, 1, 1, 0, 0, 0)) + _AFTER
    if day is None:
        start = calendar.timegm((year, month, 1, 0, 0, 0))
        end = calendar.timegm((year + month // 12, month % 12 + 1, 1, 0, 0, 0))
        return float(start), end + _AFTER
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    start = calendar.timegm((year, month, day, 0, 0, 0))
    return start - _DAY_S, start + _DAY_S + _AFTER


def query_periods(query: str) -> list[tuple[float, float]]:
    """The periods (start, end in Unix seconds, UTC) of the dates written in ``query``, at most four.

    ``9 November 2022``, ``9th November, 2022``, ``November 9, 2022``, ``November 2022`` or a year
    (month names capitalised, so the verb "may" is no date), each at its most precise reading. A
    period runs from the start of the day, month or year (a day earlier for a day: time zones) to a
    week after its end: people tell what they did in the days after.
    """
    taken: list[tuple[int, int]] = []
    out: list[tuple[float, float]] = []
    for pattern, year, month, day in _PATTERNS:
        for found in pattern.finditer(query):
            span = found.span()
            if any(a < span[1] and span[0] < b for a, b in taken):
                continue
            taken.append(span)
            period = _period(
                int(found[year]), _MONTHS[found[month]] if month else None, int(found[day]) if day else None
            )
            if period is not None and period not in out:
                out.append(period)
    return out[:_MAX_PERIODS]


class Term(msgspec.Struct, frozen=True):
    """One query term: a word (or CJK run) and its FTS5 string."""

    text: str
    """The term as the user typed it (used to find the match for a snippet)."""
    cjk: bool
    """True for a run of CJK characters."""
    phrase: str
    """The term as an FTS5 string: quoted, quotes doubled, CJK characters spaced."""
    words: tuple[str, ...] = ()
    """For a phrase of two adjacent query words (:func:`content_terms`): those words, case-folded."""
    period: tuple[float, float] | None = None
    """For a date written in the query (:func:`query_periods`): the event time
    (Unix seconds) it names. Such a term is no FTS5 phrase; the ranking favours events in it."""


def index_text(text: str) -> str:
    """The text as stored in the FTS5 table: every CJK character surrounded by U+200B.

    Words that JSON string escapes hide from the tokenizer (``\\nPORT`` is the token ``nPORT``,
    ``caf\\u00e9`` the tokens ``caf`` and ``u00e9``) follow, decoded, after a U+001E that
    :func:`display_text` cuts off again: tool arguments and results are mostly JSON. So do words
    that a terminal escape sequence hides (``\\x1b[31mFAILED`` is the token ``31mfailed``), raw or
    JSON-escaped (``\\u001b[31mFAILED``): tools run with colours write them before their most
    telling words.
    """
    extra = _escaped_words(text) if "\\" in text else []
    coloured = _JSON_ESC.sub("\x1b", text) if "\\u001" in text else text
    if "\x1b" in coloured:
        extra += _missing_words(text, _TERMINAL_ESCAPE.sub(" ", coloured))
    if extra or _HIDDEN in text:
        text = f"{text}{_HIDDEN}{' '.join(extra)}"
    return _CJK_CHAR.sub(_SPACED, text) if _has_cjk(text) else text


def _escaped_words(text: str) -> list[str]:
    """The words of ``text``'s JSON-escaped spans once decoded, less those the raw span already has."""
    extra: list[str] = []
    for span in _ESCAPED_SPAN.finditer(_WINDOWS_PATH.sub(" ", text) if ":\\" in text else text):
        raw = span.group(0)
        extra += _missing_words(raw, _JSON_ESCAPE.sub(_decode_escape, raw))
    return extra


def _missing_words(raw: str, decoded: str) -> list[str]:
    """The words of ``decoded`` that ``raw`` does not have (as many times as they are missing)."""
    return list((collections.Counter(_WORD.findall(decoded)) - collections.Counter(_WORD.findall(raw))).elements())


def _decode_escape(escape: re.Match[str]) -> str:
    return chr(int(escape[0][2:], 16)) if escape[0][1] == "u" else _SIMPLE_ESCAPES[escape[0][1]]


def _has_cjk(text: str) -> bool:
    # Most event text is ASCII; skipping the substitution for it is the cheap path.
    return not text.isascii() and _CJK_CHAR.search(text) is not None


def display_text(stored: str) -> str:
    """Undo :func:`index_text`: the original text, zero width spaces of its own included."""
    if _HIDDEN in stored:
        stored = stored.rpartition(_HIDDEN)[0]
    # index_text put one U+200B on either side of each CJK character: removing exactly one such
    # pair per CJK character, left to right, leaves the original's own U+200B in place.
    return _SPACED_CJK.sub(r"\1", stored) if ZWSP in stored else stored


def _is_token_char(ch: str) -> bool:
    # unicode61's token characters (L*, N*, Co), plus combining marks so that a
    # decomposed "é" stays inside its word; FTS5 tokenizes the phrase itself.
    cat = unicodedata.category(ch)
    return cat[0] in "LNM" or cat == "Co"


def _has_token_char(text: str) -> bool:
    # A phrase with no token characters matches nothing in FTS5 and would turn
    # a whole AND into "no results", so such fragments are dropped.
    return any(unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) == "Co" for ch in text)


def _words(query: str) -> list[str]:
    return ["".join(run) for is_word, run in itertools.groupby(query, _is_token_char) if is_word]


def _quote(tokens: str) -> str:
    return '"' + tokens.replace('"', '""') + '"'


def _make_term(run: str, cjk: bool) -> Term:
    return Term(run, cjk, _quote(" ".join(run) if cjk else run))


def query_terms(query: str, *, limit: int = MAX_TERMS) -> list[Term]:
    """Split ``query`` into at most ``limit`` distinct terms (empty list: nothing to search).

    Never raises for any ``str``: NUL bytes, lone surrogates, quotes, FTS5
    operators and punctuation are separators or plain text.
    """
    runs = (m for word in _words(query[:MAX_QUERY_CHARS]) for m in _CJK_RUN_OR_OTHER.finditer(word))
    return _distinct((_make_term(m[0], m[1] is not None) for m in runs if _has_token_char(m[0])), limit)


def _distinct(terms: Iterable[Term], limit: int = 0) -> list[Term]:
    """The first of ``terms`` of each case-folded text, until there are ``limit`` (0: all)."""
    out: list[Term] = []
    seen: set[str] = set()
    for term in terms:
        key = term.text.casefold()
        if key not in seen:
            seen.add(key)
            out.append(term)
            if len(out) == limit:
                break
    return out


def content_terms(query: str) -> list[Term]:
    """The terms a search picks from: the query's words without stopwords, plus adjacent pairs.

    Stopwords are dropped (unless that leaves nothing); CJK runs longer than two characters become
    bigrams (:func:`bigram_terms`). The search ranks by the :data:`MAX_TERMS` of these words
    that are rarest in the index, not the first typed: a long question's telling word may come
    last. Up to :data:`MAX_PAIRS` adjacent word pairs become phrase terms, so words side by side
    rank above words apart. Dates in the query come last, as terms with a ``period``.
    """
    terms = query_terms(query, limit=_MAX_RAW_TERMS)
    kept = [t for t in terms if t.cjk or t.text.casefold() not in STOPWORDS]
    out = bigram_terms(kept if kept else terms)[:_MAX_RAW_TERMS]
    dates = [Term("", False, "", period=p) for p in query_periods(query[:MAX_QUERY_CHARS])] if out else []
    return out + _pairs(query) + dates


def word_terms(terms: Sequence[Term]) -> list[Term]:
    """The terms searched as FTS5 phrases (dates left out)."""
    return [t for t in terms if t.period is None]


def _pairs(query: str) -> list[Term]:
    words = [w for w in _words(query[:MAX_QUERY_CHARS]) if _has_token_char(w)]
    pairs = (
        Term(f"{a} {b}", False, _quote(f"{a} {b}"), (a.casefold(), b.casefold()))
        for a, b in itertools.pairwise(words)
        if not ({a.casefold(), b.casefold()} & STOPWORDS or _has_cjk(a + b) or a.casefold() == b.casefold())
    )
    return _distinct(pairs, MAX_PAIRS)


def bigram_terms(terms: Sequence[Term]) -> list[Term]:
    """``terms`` with every CJK run longer than two characters as its overlapping bigrams, once each.

    ``数据库迁移失败`` does not match ``数据库的迁移失败了`` as a phrase, but its bigrams do.
    """
    split = (
        [_make_term(t.text[i : i + 2], True) for i in range(len(t.text) - 1)]
        if t.cjk and len(t.text) > 2
        else [t]
        for t in terms
    )
    return _distinct(itertools.chain.from_iterable(split))


def or_expression(terms: Sequence[Term]) -> str:
    """FTS5 expression matching rows that contain any term."""
    return " OR ".join(t.phrase for t in terms)


def _term_pattern(term: Term) -> str:
    text = _lower(term.text)
    if term.cjk:
        # The phrase matches the characters with separators between them too.
        return r"[\W_]*".join(_char_pattern(ch) for ch in text)
    return "".join(_char_pattern(ch) for ch in text)


def _char_pattern(ch: str) -> str:
    # Non-ASCII text in JSON is often written \uXXXX; the index decodes it (index_text), so must the finder.
    if ch.isascii() or ord(ch) > 0xFFFF:
        return re.escape(ch)
    return rf"(?:{re.escape(ch)}|\\u{ord(ch):04x})"


def _lower(text: str) -> str:
    # Matched lower-cased: IGNORECASE costs several times more per character. U+0130 is the one
    # character whose lower case is two: replaced first, positions stay those of the text.
    return text.replace("\u0130", "I").lower()


def match_finder(
    terms: Sequence[Term], weights: Callable[[], Mapping[str, float]] | None = None
) -> Callable[[str], tuple[int, int] | None]:
    """A function giving the (start, end) of the best place in a text to show, or ``None`` without a match.

    That is the heaviest match in the :data:`MATCH_REGION` characters holding the most weight of
    distinct terms (the earliest on a tie): a long text's first match of a common word is often far
    from the rare words the search ranked it by. A term weighs what ``weights()``
    gives its case-folded text (0 if nothing, e.g. its rarity in the index; called only when two
    terms or more are found), else 1. Whole-word matches are preferred; then any occurrence.
    """
    # Adjacent-word phrases are left out: their words are terms of their own.
    terms = [t for t in word_terms(terms) if not t.words]
    if not terms:
        return lambda text: None
    patterns = [re.compile(_term_pattern(t)) for t in terms]

    def find(text: str) -> tuple[int, int] | None:
        low = _lower(text)
        loose = sorted((m.start(), m.end(), i) for i, p in enumerate(patterns) for m in p.finditer(low))
        whole = [f for f in loose if terms[f[2]].cjk or _is_word(low, f[0], f[1])]
        found = whole or loose
        if not found:
            return None
        weight = [1.0] * len(terms)
        if weights is not None and len({i for _, _, i in found}) > 1:
            table = weights()
            weight = [table.get(t.text.casefold(), 0.0) for t in terms]
        return _densest(found, weight)

    return find


def _is_word(text: str, start: int, end: int) -> bool:
    return not (start and _WORD_CHAR.match(text, start - 1)) and not _WORD_CHAR.match(text, end)


def _densest(found: Sequence[tuple[int, int, int]], weight: Sequence[float]) -> tuple[int, int]:
    """The span of the best region of ``found`` (matches as (start, end, term), by start): see :func:`match_finder`."""
    counts: collections.Counter[int] = collections.Counter()
    best, best_at = -1.0, (0, 0)
    score = 0.0
    hi = 0
    # Two pointers: the region starts at match ``lo`` and holds the matches starting within MATCH_REGION of it.
    for lo, (start, _, _) in enumerate(found):
        while hi < len(found) and found[hi][0] < start + MATCH_REGION:
            term = found[hi][2]
            counts[term] += 1
            if counts[term] == 1:
                score += weight[term]
            hi += 1
        if score > best + 1e-9:  # (sums and differences of floats: a tie must stay one)
            best, best_at = score, (lo, hi)
        term = found[lo][2]
        counts[term] -= 1
        if counts[term] == 0:
            score -= weight[term]
    lo, hi = best_at
    # Its heaviest match (the first of them): a cut narrower than the region, centred there, still
    # shows the rarest word rather than the region's first, often common, one.
    start, end, _ = max(found[lo:hi], key=lambda f: weight[f[2]])
    return start, end


def snippet(
    text: str,
    terms: Sequence[Term],
    width: int,
    *,
    finder: Callable[[str], tuple[int, int] | None] | None = None,
) -> str:
    """At most ``width`` characters of ``text``, whitespace collapsed, centred on the match ``finder`` gives
    (default: :func:`match_finder` of ``terms``).

    Cut sides are marked with ``…`` (counted in ``width``). Without a findable
    match (e.g. the index matched through diacritic folding) the snippet is the
    start of the text.
    """
    if width <= 0:
        return ""
    span = (finder if finder is not None else match_finder(terms))(text)
    start, end = span if span is not None else (0, 0)
    # Work on a raw window a few times the width around the match: collapsing
    # whitespace of a 100 KB tool output just to show 240 characters is waste.
    raw_lo = max(0, start - 2 * width)
    raw_hi = min(len(text), end + 2 * width)
    before = _WS.sub(" ", text[raw_lo:start])
    hit = _WS.sub(" ", text[start:end])
    after = _WS.sub(" ", text[end:raw_hi])
    if raw_lo == 0:
        before = before.lstrip()
    if raw_hi == len(text):
        after = after.rstrip()
    cut_left = raw_lo > 0
    cut_right = raw_hi < len(text)
    joined = before + hit + after
    if len(joined) <= width and not cut_left and not cut_right:
        return joined
    centre = len(before) + len(hit) // 2
    if width < 3:
        # No room for markers around any content.
        lo = min(max(0, centre - width // 2), max(0, len(joined) - width))
        return joined[lo : lo + width]
    avail = width
    left = right = False
    # The markers take room from the content; a narrower window can only add
    # markers, never remove one, so this settles within three rounds.
    for _ in range(3):
        # Centre the window on the match; a match wider than the window shows its start.
        lo = len(before) if len(hit) >= avail else max(0, centre - avail // 2)
        hi = min(len(joined), lo + avail)
        lo = max(0, hi - avail)
        left = cut_left or lo > 0
        right = cut_right or hi < len(joined)
        needed = width - left - right
        if needed == avail:
            break
        avail = needed
    return (ELLIPSIS if left else "") + joined[lo:hi] + (ELLIPSIS if right else "")


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending with ``…`` when cut."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    return text[: limit - 1] + ELLIPSIS
