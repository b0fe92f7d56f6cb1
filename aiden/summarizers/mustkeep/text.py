"""Text primitives: clipping, sentence splitting, content words and distinctive tokens."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final

from aiden.policy.summary_md import normalize

ITEM_MAX_CHARS: Final = 300
"""Longest kept sentence; longer ones are clipped at a word boundary with an ellipsis."""

_ELLIPSIS: Final = "…"
_CJK_TERMINATORS: Final = ("\u3002", "\uff01", "\uff1f", "\uff1b", "\uff0c")
_WS: Final = re.compile(r"\s+")
_CJK_CLASS: Final = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_CJK: Final = re.compile(_CJK_CLASS)
_CJK_RUN: Final = re.compile(_CJK_CLASS + "+")


def join_sentences(sentences: Iterable[str]) -> str:
    """Join sentences with a space, except after CJK punctuation (CJK text has no spaces)."""
    out = ""
    for sentence in sentences:
        out += f" {sentence}" if out and not out.endswith(_CJK_TERMINATORS) else sentence
    return out


def clip(text: str, limit: int = ITEM_MAX_CHARS) -> str:
    """Collapse whitespace and cut ``text`` to ``limit`` characters at a word boundary."""
    flat = _WS.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: max(1, limit - 1)]
    space = cut.rfind(" ")
    # Cut at a space unless that loses most of the text (CJK has no spaces).
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + _ELLIPSIS


# Sentence ends: CJK terminators always; ASCII ones only before whitespace so
# "app.py", "v1.2" and "e.g.x" stay whole. Not ";": "X was caused by Y; fixed
# by Z" must stay one fact.
_SENTENCE_END: Final = re.compile("(?<=[\u3002\uff01\uff1f])|(?<=[.!?])\\s+")
_ABBREVIATIONS: Final = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "mr.", "dr.", "fig.", "cf.")
_FENCE: Final = re.compile(r"^\s*(```|~~~)")
BULLET: Final = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
"""A list item's bullet or number ("- ", "3. ") with the indent before it."""
_SHELLS: Final = frozenset({"bash", "sh", "shell", "console", "zsh", "terminal", "cmd", "powershell", "ps"})
_MAX_SENTENCES: Final = 400


def split_sentences(text: str) -> list[str]:
    """Split prose into whitespace-normalized sentences (English and CJK punctuation).

    Lines are split first (a bullet is a sentence), then sentences inside a
    line. Fenced code blocks are skipped. At most ``_MAX_SENTENCES`` are
    returned, so a pasted log cannot make the caller quadratic.
    """
    out: list[str] = []
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        first = len(out)  # an abbreviation joins the next piece of its own line only
        for piece in _SENTENCE_END.split(BULLET.sub("", line)):
            piece = _WS.sub(" ", piece.strip())
            if not piece:
                continue
            if len(out) > first and out[-1].casefold().endswith(_ABBREVIATIONS):
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
        if len(out) >= _MAX_SENTENCES:
            return out[:_MAX_SENTENCES]
    return out


# An issue or PR text a coding-agent harness pastes into the task, marked where it starts and ends: in a tag
# on lines of its own (SWE-agent 1.x's <pr_description>, OpenHands' <issue_description>) or under an "ISSUE:"
# line after "Here's the issue text:" up to the next label line (SWE-agent 0.x's "INSTRUCTIONS:"). Its "X
# should be optional" is the issue author's, no rule for the agent. A tag named in prose, a section the user
# labels "ISSUE:" themselves, a blockquote or a quote tag may hold the user's own rules: they stay theirs
# (a guess at where a paste ends lost the user's rules after it).
_ISSUE_TAGS: Final = (
    "issue|issue_description|issue_text|github_issue|pr_description|problem_statement|problem_description|bug_report"
)
_ISSUE_OPEN: Final = re.compile(rf"^[ \t]*<({_ISSUE_TAGS})>[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
_ISSUE_LABEL: Final = re.compile(r"(?i:issue text):[ \t]*\r?\n(ISSUE:[ \t]*\r?\n)")
_LABEL: Final = re.compile(r"^[ \t]*[A-Z][A-Z _-]{2,40}:[ \t]*\r?$", re.MULTILINE)
_FENCE_LINE: Final = re.compile(r"^[^\S\n]*(?:```|~~~)", re.MULTILINE)


def _quotes(text: str) -> Iterator[tuple[int, int, int, int]]:
    """Each issue text pasted into ``text`` as ``(start, begin, end, after)``: its mark starts at ``start``, it
    runs from ``begin`` to ``end``, the writer's own text goes on at ``after``."""
    if "<" not in text and "ISSUE:" not in text:
        return
    search = 0
    code: list[tuple[int, int]] | None = None  # fenced blocks' spans: a tag or label shown in code marks nothing
    # The next mark of each kind and the next end of each mark, searched again only once passed (none found
    # means none further on): one pass over the text, however many marks.
    tagged, labelled = _ISSUE_OPEN.search(text), _ISSUE_LABEL.search(text)
    ends: dict[str, re.Match[str] | None] = {}
    while True:
        if tagged is not None and tagged.start() < search:
            tagged = _ISSUE_OPEN.search(text, search)
        if labelled is not None and labelled.start(1) < search:
            labelled = _ISSUE_LABEL.search(text, search)
        if tagged is not None and (labelled is None or tagged.start() < labelled.start(1)):
            mark, (start, search) = tagged.group(1).casefold(), tagged.span()
            closing = re.compile(rf"^[ \t]*</{mark}>[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
        elif labelled is not None:
            (start, search), mark, closing = labelled.span(1), "", _LABEL  # (the next label is the writer's)
        else:
            return
        if code is None:
            fences = [m.start() for m in _FENCE_LINE.finditer(text)]
            code = list(zip(fences[::2], [*fences[1::2], len(text)], strict=False))
        inside = bisect.bisect_right(code, (start, len(text))) - 1
        if inside >= 0 and start < code[inside][1]:
            continue
        if mark not in ends or ((end := ends[mark]) is not None and end.start() < search):
            ends[mark] = closing.search(text, search)
        if (end := ends[mark]) is None:
            continue
        yield start, search, end.start(), end.end() if mark else end.start()
        search = end.end()


def has_quote(text: str) -> bool:
    """Whether ``text`` holds an issue or PR text pasted into it (see :func:`quoted_sentences`)."""
    return next(_quotes(text), None) is not None


def quoted_sentences(text: str, own: Callable[[str], str] | None = None) -> list[tuple[str, bool]]:
    """The sentences of ``text`` (as :func:`split_sentences`, at most as many), each with whether it is quoted:
    part of an issue or PR text a harness pasted into it (between tags on lines of their own, or an "ISSUE:"
    section after "Here's the issue text:" closed by the next label line; the tags and the "ISSUE:" line are
    in no sentence). ``own`` first takes what is no sentence out of each part."""
    out: list[tuple[str, bool]] = []
    at = 0
    for start, begin, end, after in _quotes(text):
        for part, quoted in ((text[at:start], False), (text[begin:end], True)):
            out += [(sentence, quoted) for sentence in split_sentences(own(part) if own else part)]
        if len(out) >= _MAX_SENTENCES:
            return out[:_MAX_SENTENCES]
        at = after
    rest = text[at:] if at else text
    out += [(sentence, False) for sentence in split_sentences(own(rest) if own else rest)]
    return out[:_MAX_SENTENCES]


def code_lines(text: str) -> list[str]:
    """Lines of ``text`` that are shell commands: ``$ cmd`` lines and lines of shell code fences."""
    out: list[str] = []
    in_shell = False
    in_code = False
    for raw in text.splitlines():
        if _FENCE.match(raw):
            in_shell = not in_code and raw.strip()[3:].strip().casefold() in _SHELLS
            in_code = not in_code
            continue
        line = raw.strip()
        if line.startswith("$ ") and len(line) > 2:
            out.append(line)
        elif in_shell and line and not line.startswith("#"):
            out.append(line if line.startswith("$ ") else f"$ {line}")
    return out


_WORD: Final = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_STOPWORD_TEXT: Final = """a an the and or but if then else of to in on at by for with from into onto over under
    is are was were be been being it its this that these those there here we you they he she i
    me my our your their them us as so do does did done has have had not no yes can could
    will would should shall may might just also very too than which who whom what when where
    why how all any some each about after before again up down out off only own same such
    let lets let's i'll we'll i'm it's that's don't"""
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


def content_words(text: str) -> list[str]:
    """Words that carry meaning (no stopwords); CJK runs contribute their character bigrams."""
    lowered = text.casefold()
    words: list[str] = []
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            words.append(run)
        words.extend(run[i : i + 2] for i in range(len(run) - 1))
    for word in _WORD.findall(_CJK.sub(" ", lowered)):
        if len(word) >= 3 and word not in _STOPWORDS:
            words.append(word)
    return words


_URL: Final = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")
_EMAIL: Final = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_EXTENSIONS: Final = (
    "py|pyi|pyx|js|mjs|cjs|ts|tsx|jsx|json|jsonl|ya?ml|toml|md|rst|txt|cfg|ini|sh|bash|zsh|"
    "go|rs|java|kt|swift|c|cc|h|hpp|cpp|rb|php|sql|html?|css|scss|lock|env|csv|tsv|xml|"
    "gradle|conf|log|proto|tf|ipynb|vue|svelte|dockerfile|mk|cs|scala|lua|r|pl|ex|exs|dart"
)
_PATH: Final = re.compile(
    r"(?<![\w/.@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]"
    rf"|(?<![\w/.@-])[\w@+-][\w.@+-]*\.(?:{_EXTENSIONS})\b",
    re.IGNORECASE,
)
# "Node.js", "Vue.js": product names, not files.
_FRAMEWORK_NAME: Final = re.compile(r"^[A-Z][A-Za-z]*\.js$")
_HAS_EXT: Final = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_TOKEN_PATTERNS: Final = (
    re.compile(r"`([^`\n]{1,80})`"),  # backticked code
    re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"),  # IPv4[:port]
    re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"),  # UUID
    re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b"),  # ticket ids: JIRA-123
    re.compile(r"\b(?=[\w-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b"),  # eu-west-1, acme-prod-42
    re.compile(r"\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)?\b"),  # versions
    re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"),  # hashes
    re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]\b"),  # snake_case, CONST_CASE
    re.compile(r"\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b"),  # camel/Pascal
    re.compile(r"\b[A-Za-z]+\d+[A-Za-z0-9]*\b"),  # ERR42, gpt4o, s3
    re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]+"),  # --flags
    re.compile(r"\b[a-z_]\w*(?:\.[a-z_]\w*){2,}\b"),  # dotted.module.names
)
_UNITS: Final = (
    r"ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|"
    r"[kmgt]i?b|bytes?|%|px|rem|em|tokens?|chars?|characters|lines?|rows?|requests?|"
    r"req/s|rps|qps|users?|items?|retries|workers?|threads?|cores?|[cg]pus?|usd|eur|dollars?|x|k|m"
)
_NUMBER_WITH_UNIT: Final = re.compile(
    rf"\b\d+(?:[.,]\d+)*\s?(?:{_UNITS})\b|[$€£¥]\s?\d[\d,.]*\b|\bport\s+\d+\b"
    r"|\d+(?:\.\d+)?\s?(?:个|天|小时|分钟|秒|毫秒|次|行|元|美元|万|千|周|月|年|%)",
    re.IGNORECASE,
)
_NUMBER: Final = re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)*(?![\w])")


def _strip_path(raw: str) -> str:
    return raw.rstrip(".,;:)]}'\"")


def find_paths(text: str) -> list[str]:
    """File paths mentioned in ``text``, in order of appearance, without duplicates.

    A slash-separated token counts only if it looks like a path (leading ``/``,
    ``./``, ``~/``, a file extension, or at least two slashes), so prose like
    "and/or" or "client/server" is not taken for one. URLs are not paths.
    """
    scrubbed = _URL.sub(" ", text)
    out: list[str] = []
    for match in _PATH.finditer(scrubbed):
        path = _strip_path(match.group(0))
        if not path or path in out:
            continue
        if "/" in path:
            leading = path.startswith(("/", "./", "../", "~/"))
            if not (leading or _HAS_EXT.search(path) or path.count("/") >= 2) or not path.strip("/.~"):
                continue
        elif _FRAMEWORK_NAME.match(path):
            continue
        out.append(path)
    return out


def arg_paths(args: Mapping[str, object]) -> list[str]:
    """The file paths a tool call's arguments name: a path or file argument's value, paths in the others."""
    paths: list[str] = []
    for key, value in args.items():
        if isinstance(value, str) and ("path" in key.casefold() or "file" in key.casefold()):
            paths.extend([value.strip()] if value.strip() else [])
        elif isinstance(value, str):
            paths.extend(find_paths(value))
    return paths


def key_tokens(text: str) -> list[str]:
    """The distinctive tokens of ``text`` (paths, URLs, ids, versions, numbers), normalized:
    a summary that lost any of them lost the fact."""
    tokens = [
        *(_strip_path(match.group(0)) for match in _URL.finditer(text)),
        *(match.group(0) for match in _EMAIL.finditer(text)),
        *find_paths(text),
        *(match.group(match.lastindex or 0) for pattern in _TOKEN_PATTERNS for match in pattern.finditer(text)),
        *(match.group(0) for match in _NUMBER_WITH_UNIT.finditer(text)),
        *(match.group(0) for match in _NUMBER.finditer(text)),
    ]
    found = list(dict.fromkeys(norm for norm in map(normalize, tokens) if norm))
    # Drop tokens contained in a longer token ("8443" inside "port 8443").
    return [t for t in found if not any(t != other and t in other for other in found)]


def has_fact_tokens(text: str) -> bool:
    """True if ``text`` names something specific: an id, a path, a URL or a number with a unit / of 2+ digits."""
    if _URL.search(text) or _EMAIL.search(text) or find_paths(text) or _NUMBER_WITH_UNIT.search(text):
        return True
    if any(len(m.group(0).replace(".", "").replace(",", "")) >= 2 for m in _NUMBER.finditer(text)):
        return True
    return any(pattern.search(text) for pattern in _TOKEN_PATTERNS[:10])
