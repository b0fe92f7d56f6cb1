"""Generic text helpers: normalization, clipping, sentence splitting and content words.

The extractive summarizer and the must-keep check share these primitives so
both agree on what a sentence *is* and clip it to the same string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

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
        if out and not out.endswith(_CJK_TERMINATORS):
            out += " "
        out += sentence
    return out


def clip(text: str, limit: int = ITEM_MAX_CHARS) -> str:
    """Collapse whitespace and cut ``text`` to ``limit`` characters at a word boundary.

    Deterministic, so the extractive summary and the must-keep check clip the
    same sentence to the same string.
    """
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
_BULLET: Final = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")


def _prose_lines(text: str) -> Iterator[tuple[str, bool]]:
    """Yield ``(line, in_code_block)`` for each line of ``text``."""
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            continue
        yield line, in_code


def split_sentences(text: str, *, max_sentences: int = 400) -> list[str]:
    """Split prose into whitespace-normalized sentences (English and CJK punctuation).

    Lines are split first (a bullet is a sentence), then sentences inside a
    line. Fenced code blocks are skipped: code is not prose and would only
    produce noise. At most ``max_sentences`` are returned, so a pasted log
    cannot make the caller quadratic.
    """
    out: list[str] = []
    for line, in_code in _prose_lines(text):
        if in_code:
            continue
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        pieces = [p.strip() for p in _SENTENCE_END.split(line)]
        merged: list[str] = []
        for piece in pieces:
            if not piece:
                continue
            if merged and merged[-1].casefold().endswith(_ABBREVIATIONS):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        for sentence in merged:
            out.append(_WS.sub(" ", sentence))
            if len(out) >= max_sentences:
                return out
    return out


def code_lines(text: str) -> list[str]:
    """Lines of ``text`` that are shell commands: ``$ cmd`` lines and lines of shell code fences."""
    out: list[str] = []
    in_shell = False
    in_code = False
    for raw in text.splitlines():
        fence = _FENCE.match(raw)
        if fence:
            if in_code:
                in_code = in_shell = False
            else:
                in_code = True
                lang = raw.strip()[3:].strip().casefold()
                in_shell = lang in {
                    "bash",
                    "sh",
                    "shell",
                    "console",
                    "zsh",
                    "terminal",
                    "cmd",
                    "powershell",
                    "ps",
                }
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
