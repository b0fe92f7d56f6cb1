"""The must-keep check: select the facts a summary may not lose and append the lost ones,
inline or as a job of the helper process (:mod:`aiden.offload`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Final

import anyio
import msgspec

from aiden import offload
from aiden.events import SessionEvent
from aiden.policy.summary_md import normalize
from aiden.summarizers.mustkeep.classify import (
    ALWAYS_KEPT,
    Speaker,
    classify_sentence,
    is_phatic,
    is_routine_request,
    sets_a_rule,
    split_speaker,
)
from aiden.summarizers.mustkeep.text import (
    arg_paths,
    clip,
    content_words,
    find_paths,
    has_fact_tokens,
    key_tokens,
    quoted_sentences,
    split_sentences,
)

__all__ = [
    "Haystack",
    "MustKeepJob",
    "appended_count",
    "apply_job",
    "apply_must_keep",
    "extract_must_keep",
    "run_job",
    "with_must_keep",
]


_MUST_KEEP_HEADER: Final = "Must keep:"
_FILES_LINE: Final = "Files:"


def _tool_arg_paths(event: SessionEvent) -> list[str]:
    if not event.tool_args:
        return []
    try:
        args = json.loads(event.tool_args)
    except ValueError:
        return find_paths(event.tool_args)
    return arg_paths(args) if isinstance(args, dict) else []


def extract_must_keep(events: Sequence[SessionEvent], *, max_items: int) -> list[str]:
    """Items a summary of ``events`` must not lose, most important first, at most ``max_items``.

    In order: the user's constraints, preferences and corrections; decisions;
    sentences naming ids, numbers with units or URLs; then file paths from
    messages and tool-call arguments. Raw tool output is never a source.
    Deterministic.
    """
    if max_items <= 0:
        return []
    user_items: list[str] = []
    decisions: list[str] = []
    facts: list[str] = []
    paths: list[str] = []
    for event in events:
        if event.type == "tool_call":
            paths.extend(_tool_arg_paths(event))
            continue
        if event.type not in ("user_input", "assistant_output", "role_output"):
            continue
        speaker: Speaker = "user" if event.type == "user_input" else "assistant"
        # A named speaker ("Caroline: ...") is a chat participant: only a correction or a binding
        # rule of theirs is one for the agent (as in the extractive summarizer).
        named = bool(split_speaker(event.content.strip())[0])
        # (a user's quoted material, a pasted issue's "should", is its author's, as a named speaker's)
        if speaker == "user":
            sentences = quoted_sentences(event.content)
        else:
            sentences = [(sentence, False) for sentence in split_sentences(event.content)]
        for sentence, quoted in sentences:
            kind = classify_sentence(sentence, speaker=speaker, named=named)
            if kind not in ALWAYS_KEPT and is_phatic(sentence):
                continue  # "That must have been awesome!" is no constraint a summary must keep
            item = clip(sentence)
            if speaker == "user" and sets_a_rule(kind, sentence, named=named or quoted):
                user_items.append(item)
            elif kind == "decision":
                decisions.append(item)
            elif (
                # Greetings, questions and routine requests ("step 19 of PROJ-6915") name ids without
                # stating a fact; a first request ("Migrate the exporter to gRPC") is the task itself.
                kind not in ("greeting", "question")
                and not (kind == "request" and is_routine_request(sentence))
                and has_fact_tokens(sentence)
                and _has_non_path_fact(sentence)
            ):
                facts.append(item)
        paths.extend(find_paths(event.content))
    return _dedupe([*user_items, *decisions, *facts, *paths])[:max_items]


def _has_non_path_fact(sentence: str) -> bool:
    """True if the sentence names something beyond file paths (paths are kept on their own)."""
    scrubbed = sentence
    for path in find_paths(sentence):
        scrubbed = scrubbed.replace(path, " ")
    return has_fact_tokens(scrubbed)


def _dedupe(items: Iterable[str]) -> list[str]:
    first: dict[str, str] = {}
    for item in items:
        first.setdefault(normalize(item), item)
    first.pop("", None)
    return list(first.values())


class Haystack:
    """A summary prepared for repeated :meth:`contains` checks (normalized once)."""

    __slots__ = ("_text", "_words")

    def __init__(self, summary_text: str) -> None:
        self._text = normalize(summary_text)
        self._words: frozenset[str] | None = None

    def contains(self, item: str) -> bool:
        """Whether the key content of ``item`` is in the summary.

        Present when the normalized item occurs verbatim, or when every
        distinctive token (path, id, number) occurs and half of its content
        words do (80 % without distinctive tokens).
        """
        norm = normalize(item)
        if not norm or norm in self._text:
            return True
        keys = key_tokens(item)
        if any(key not in self._text for key in keys):
            return False
        words = content_words(item)
        if not words:
            return bool(keys)
        if self._words is None:
            self._words = frozenset(content_words(self._text))
        covered = sum(1 for word in words if word in self._words)
        return covered / len(words) >= (0.5 if keys else 0.8)


def apply_must_keep(
    summary_text: str,
    items: Sequence[str],
    *,
    max_items: int,
    max_chars: int = 2000,
) -> str:
    """Append the ``items`` missing from ``summary_text`` under a bounded ``Must keep:`` section.

    An item is missing when :meth:`Haystack.contains` says so. At most
    ``max_items`` items are appended and the section stays within
    ``max_chars`` characters (items clipped, later ones dropped). If nothing
    is missing, ``summary_text`` is returned unchanged.
    """
    if max_items <= 0 or max_chars <= 0 or not items:
        return summary_text
    haystack = Haystack(summary_text)
    missing = [clip(item) for item in _dedupe(items) if not haystack.contains(item)]
    if not missing:
        return summary_text
    prefix = "\n\n" if summary_text.strip() else ""
    section = _MUST_KEEP_HEADER
    budget = max_chars - len(prefix) - len(section)
    added = 0
    # A path alone is no list entry: lost paths go on one "Files:" line, as a summary lists
    # them; a path is never clipped (a cut path names nothing).
    paths: list[str] = []
    for item in missing:
        if added >= max_items:
            break
        if find_paths(item) == [item.strip()]:  # a bare path
            cost = len(item) + (2 if paths else len(_FILES_LINE) + 2)
            if cost <= budget:
                paths.append(item)
                budget -= cost
                added += 1
            continue
        line = f"\n- {item}"
        if len(line) > budget:
            # Clip rather than skip, so the first missing facts always make it in.
            room = budget - 3
            if room < 16:
                break
            line = f"\n- {clip(item, room)}"
        section += line
        budget -= len(line)
        added += 1
    if added == 0:
        return summary_text
    files = f"\n{_FILES_LINE} " + ", ".join(paths) if paths else ""
    return summary_text.rstrip() + prefix + section + files


def appended_count(before: str, after: str) -> int:
    """How many items :func:`apply_must_keep` appended to ``before`` to give ``after`` (telemetry)."""
    if after == before:
        return 0
    # Each appended item is one "\n- " line (clip() collapses an item's whitespace), or one
    # path on the closing "Files:" line.
    appended = after[len(before.rstrip()) :]
    _, found, files = appended.rpartition(f"\n{_FILES_LINE} ")
    paths = len(files.split(", ")) if found else 0
    return appended.count("\n- ") + paths


# The check as a step of a chunk summary: inline, in the helper process or in a worker thread.
class MustKeepJob(msgspec.Struct, frozen=True):
    """``apply_must_keep(summary, extract_must_keep(events))`` with the configured item limit."""

    summary: str
    events: tuple[SessionEvent, ...]
    max_items: int


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(MustKeepJob)


def apply_job(job: MustKeepJob) -> str:
    """The summary with the items of ``job.events`` it lacks appended (see :func:`apply_must_keep`)."""
    items = extract_must_keep(job.events, max_items=job.max_items)
    return apply_must_keep(job.summary, items, max_items=job.max_items)


def run_job(payload: bytes) -> bytes:
    """The helper process's entry: :func:`apply_job` on encoded arguments."""
    return _encoder.encode(apply_job(_decoder.decode(payload)))


async def with_must_keep(summary: str, events: Sequence[SessionEvent], max_items: int) -> str:
    """:func:`apply_job` without stalling the event loop or holding the GIL for long.

    Inline for an ordinary chunk (a worker thread would cost appends more);
    a long one goes to the helper process, or without it to a worker thread.
    """
    job = MustKeepJob(summary, tuple(events), max_items)
    if not offload.too_long_for_the_loop(job.events, len(job.summary)):
        return apply_job(job)
    try:
        return msgspec.msgpack.decode(await offload.run_job("must_keep", _encoder.encode(job)), type=str)
    except offload.OffloadUnavailable:
        return await anyio.to_thread.run_sync(apply_job, job)
