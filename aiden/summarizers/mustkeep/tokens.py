"""Distinctive tokens of a sentence: file paths, URLs, identifiers, versions and numbers.

A summary that lost one of these lost the fact, however well it paraphrased
the rest, so they are what the must-keep check looks for.
"""

from __future__ import annotations

import re
from typing import Final

from aiden.policy.summary_md import normalize

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
            if not (leading or _HAS_EXT.search(path) or path.count("/") >= 2):
                continue
            if path.strip("/.~") == "":
                continue
        elif _FRAMEWORK_NAME.match(path):
            continue
        out.append(path)
    return out


def key_tokens(text: str) -> list[str]:
    """The distinctive tokens of ``text`` (paths, URLs, ids, versions, numbers), normalized.

    A summary that lost any of these lost the fact, however well it
    paraphrased the rest of the sentence.
    """
    found: list[str] = []

    def add(token: str) -> None:
        norm = normalize(token)
        if norm and norm not in found:
            found.append(norm)

    for match in _URL.finditer(text):
        add(_strip_path(match.group(0)))
    for match in _EMAIL.finditer(text):
        add(match.group(0))
    for path in find_paths(text):
        add(path)
    for pattern in _TOKEN_PATTERNS:
        for match in pattern.finditer(text):
            add(match.group(match.lastindex or 0))
    for match in _NUMBER_WITH_UNIT.finditer(text):
        add(match.group(0))
    for match in _NUMBER.finditer(text):
        add(match.group(0))
    # Drop tokens contained in a longer token ("8443" inside "port 8443").
    return [t for t in found if not any(t != other and t in other for other in found)]


def has_fact_tokens(text: str) -> bool:
    """True if ``text`` names something specific: an id, a path, a URL or a number with a unit / of 2+ digits."""
    if _URL.search(text) or _EMAIL.search(text) or find_paths(text):
        return True
    if _NUMBER_WITH_UNIT.search(text):
        return True
    if any(len(m.group(0).replace(".", "").replace(",", "")) >= 2 for m in _NUMBER.finditer(text)):
        return True
    return any(pattern.search(text) for pattern in _TOKEN_PATTERNS[:10])
