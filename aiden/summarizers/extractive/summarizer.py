"""The extractive summarizer class, the rolling fold and a summary's load-bearing lines."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Final

import anyio
import msgspec

from aiden import offload
from aiden.config import SUMMARY_CHARS_PER_TOKEN
from aiden.events import SessionEvent
from aiden.policy.summary_md import normalize
from aiden.policy.tokens import cut_to_tokens
from aiden.summarizers.extractive.extract import (
    R_FAILED,
    R_NOTE,
    R_REST,
    SECTIONS,
    Collector,
    Item,
    line_of,
)
from aiden.summarizers.extractive.salience import Rarity, is_junk_line, shown_words
from aiden.summarizers.extractive.selection import (
    Deduped,
    collapse_requests,
    dedupe,
    render_history,
    render_session,
    select,
    select_session,
    session_items,
    structured_history,
    with_absorbed,
)
from aiden.summarizers.extractive.tools import TOOL_NOTE_CHARS, is_read_only_command
from aiden.summarizers.mustkeep.classify import is_routine_request
from aiden.summarizers.mustkeep.text import clip, find_paths
from aiden.summarizers.protocol import SummaryRequest, SummaryResult

_SLICE_CHARS: Final = 8_000  # checkpoint after about this much event text
_EVENT_CHARS: Final = 400  # what one event's fixed cost is worth in text


class ExtractiveJob(msgspec.Struct, frozen=True):
    """One :meth:`ExtractiveSummarizer.summarize_sync` call with the summarizer's settings (a helper job)."""

    request: SummaryRequest
    max_tokens: int | None
    fold_max_lines: int


_job_encoder = msgspec.msgpack.Encoder()
_job_decoder = msgspec.msgpack.Decoder(ExtractiveJob)
_result_decoder = msgspec.msgpack.Decoder(SummaryResult)


def run_job(payload: bytes) -> bytes:
    """The helper process's entry (:mod:`aiden.offload`): an encoded :class:`ExtractiveJob` in, its result out."""
    job = _job_decoder.decode(payload)
    summarizer = ExtractiveSummarizer(max_tokens=job.max_tokens, fold_max_lines=job.fold_max_lines)
    return _job_encoder.encode(summarizer.summarize_sync(job.request))


class ExtractiveSummarizer:
    """Rule-based, deterministic, offline summarizer (aiden's embedded default).

    ``max_tokens`` caps every request's budget (the smaller wins); the text takes at most
    :data:`~aiden.config.SUMMARY_CHARS_PER_TOKEN` characters per token of it.
    ``fold_max_lines`` bounds a ``rolling_fold`` result: the Rolling Summary's
    line cap drops the *oldest* lines, so a fold must land well below it.
    ``previous_summary`` is merged for ``rolling_fold`` and ``session_summary``
    only (for a history request it stays in summary.md on its own).
    """

    def __init__(self, *, max_tokens: int | None = None, fold_max_lines: int = 60) -> None:
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        if fold_max_lines <= 0:
            raise ValueError("fold_max_lines must be positive")
        self.max_tokens = max_tokens
        self.fold_max_lines = fold_max_lines

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request`` without stalling the event loop or holding the GIL for long.

        A large request runs in the helper process (:mod:`aiden.offload`); a
        small one is walked here with a checkpoint every ``_SLICE_CHARS``, so
        other tasks keep running and cancellation is honoured. Both give the
        same result.
        """
        too_long = offload.too_long_for_the_loop(
            _events_to_walk(request), len(request.text) + len(request.previous_summary)
        )
        if too_long and type(self) is ExtractiveSummarizer:
            job = ExtractiveJob(request, self.max_tokens, self.fold_max_lines)
            try:
                return _result_decoder.decode(await offload.run_job("extractive", _job_encoder.encode(job)))
            except offload.OffloadUnavailable:
                pass  # run it here, as below
        collector, shown = Collector(), set[str]()
        await anyio.lowlevel.checkpoint()
        for _slice in _walk(request, collector, shown):
            await anyio.lowlevel.checkpoint()
        if too_long:
            # The helper process is unavailable: dedupe and selection cannot be sliced.
            return await anyio.to_thread.run_sync(self._finish, request, collector, frozenset(shown))
        return self._finish(request, collector, frozenset(shown))

    def summarize_sync(self, request: SummaryRequest) -> SummaryResult:
        """The same summary, computed synchronously (pure CPU work, no I/O)."""
        collector, shown = Collector(), set[str]()
        for _slice in _walk(request, collector, shown):
            pass
        return self._finish(request, collector, frozenset(shown))

    def _finish(self, request: SummaryRequest, collector: Collector, shown: frozenset[str]) -> SummaryResult:
        budget = max(1, min(request.max_tokens, self.max_tokens or request.max_tokens))
        result = self._compose(request, collector, shown, budget)
        # Long words estimate few tokens: the characters are bounded too, so a summary made to the
        # budget always fits summary_max_chars (Config.chunk_summary_tokens keeps the budget under it).
        cap = SUMMARY_CHARS_PER_TOKEN * budget
        if len(result.text) > cap:
            return msgspec.structs.replace(result, text=cut_to_tokens(result.text, cap, len))
        return result

    def _compose(
        self, request: SummaryRequest, collector: Collector, shown: frozenset[str], budget: int
    ) -> SummaryResult:
        if request.purpose == "rolling_fold":
            folded = _newest_commands(
                [it for it in _weigh(collector.finish()) if it.section != "tool_notes" and not _narrates(it)]
            )
            deduped = dedupe(collapse_requests(_keep_latest_open(folded)))
            chosen = select(deduped.kept or [_fallback_note(request)], budget, max_lines=self.fold_max_lines)
            return _history_result(chosen, deduped)
        _add_open_thread(collector)
        deduped = dedupe(collapse_requests(_weigh(collector.finish(), shown)))
        if request.purpose == "session_summary":
            # A rule a kept line absorbed still belongs under its heading; a chat participant's
            # sentence the goal already quotes would only repeat it.
            items = [
                *deduped.kept,
                *(it for it, holder in deduped.absorbed if it.section != "notes" or holder.section != "goal"),
            ]
            chosen = select_session(session_items(collector, items), budget)
            return SummaryResult(text=render_session(chosen), structured=structured_history(chosen))
        kept = deduped.kept
        if not any(it.section in _SAYS for it in kept):
            kept = [*kept, *_what_happened(request, collector)]
        return _history_result(select(kept or [_fallback_note(request)], budget), deduped)


def _walk(request: SummaryRequest, collector: Collector, shown: set[str]) -> Iterator[None]:
    """Feed ``request`` to ``collector`` (first the summaries a fold or session summary merges, then
    the events) and its hot window's words to ``shown``, pausing after about every ``_SLICE_CHARS``
    of text (the async caller checkpoints there)."""
    if request.purpose in ("rolling_fold", "session_summary"):
        collector.read_summary(request.previous_summary)
        collector.read_summary(request.text)
    walked = 0
    for event in _events_to_walk(request):
        collector.feed(event)
        # Each event costs a fixed overhead besides its text: many short events are slow too.
        walked += _EVENT_CHARS + len(event.content) + len(event.tool_args or "")
        if walked >= _SLICE_CHARS:
            walked = 0
            yield
    for event in request.hot_window:
        shown.update(shown_words((event.content,)))
        walked += len(event.content)
        if walked >= _SLICE_CHARS:
            walked = 0
            yield


def _history_result(chosen: list[Item], deduped: Deduped) -> SummaryResult:
    # The structured view also holds what the chosen lines absorbed.
    structured = structured_history(with_absorbed(chosen, deduped))
    return SummaryResult(text=render_history(chosen), structured=structured)


# Sections whose lines say what happened; a chunk summary of only Files / Commands / tool results / an
# open thread (which a newer chunk's supersedes) says nothing a reader can use.
_SAYS: Final = frozenset(SECTIONS) - {"open", "files", "commands", "tool_notes"}
# Lists a reader scans; a bare path, a test runner's line or phatic talk in them is noise.
_LIST_SECTIONS: Final = frozenset(SECTIONS) - {"goal", "outcome", "errors", "files", "commands"}


def _weigh(items: list[Item], shown: frozenset[str] = frozenset()) -> list[Item]:
    """``items`` without junk list entries, each with its information per token within the range
    (a word the hot window that stays verbatim says too counts less: ``shown``)."""
    rarity = Rarity((it.text for it in items), shown=shown)
    return [
        msgspec.structs.replace(it, info=rarity.density(line_of(it)))
        for it in items
        if it.section not in _LIST_SECTIONS or not is_junk_line(it.text)
    ]


_NARRATION: Final = re.compile(r"^(?:Agent (?:read|changed|ran) |seq \d+-\d+: \d+ events)")


def _narrates(item: Item) -> bool:
    """A chunk's sentence of what it did: the chunk's own, not a fact the rolling summary carries on."""
    return item.section == "notes" and _NARRATION.match(item.text) is not None


def _what_happened(request: SummaryRequest, collector: Collector) -> list[Item]:
    """What a range did when nothing it said was kept: its newest informative message, and its tool work."""
    # The paths are on the Files line: the sentence counts them.
    parts: list[str] = []
    for verb, paths in (("read", collector.read_paths), ("changed", collector.edited_paths)):
        if paths:
            n = len(set(paths))
            parts.append(f"{verb} {n} file" if n == 1 else f"{verb} {n} files")
    if collector.commands_ok:
        ran = _some([cmd.removeprefix("$ ") for cmd in collector.commands_ok])
        parts.append(f"ran {ran} without errors")
    if collector.commands_failed:
        failed = _some([cmd.removeprefix("$ ") for cmd, _ in collector.commands_failed])
        parts.append(f"ran {failed}, which failed: {collector.commands_failed[-1][1]}")
    message = _newest_message(request)
    items = [message] if message is not None else []
    if parts:
        items.append(Item("notes", clip("Agent " + "; ".join(parts) + ".", 2 * TOOL_NOTE_CHARS), R_NOTE, 1))
    return items


def _some(things: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(list(dict.fromkeys(things))[:limit])
    more = len(set(things)) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def _events_to_walk(request: SummaryRequest) -> Sequence[SessionEvent]:
    # A rolling fold folds text; the protocol gives it no events.
    return () if request.purpose == "rolling_fold" else request.events


def _fallback_note(request: SummaryRequest) -> Item:
    """What a range with nothing load-bearing is summarized as (never an empty summary):
    its newest message, failing that its shape."""
    message = _newest_message(request)
    if message is not None:
        return message
    if request.events:
        first, last = request.events[0].seq, request.events[-1].seq
        return Item("notes", f"seq {first}-{last}: {len(request.events)} events, tool output only", R_NOTE, 0)
    line = next((ln.strip() for ln in request.text.splitlines() if ln.strip()), "")
    return Item("notes", clip(line, TOOL_NOTE_CHARS) if line else "(nothing to summarize)", R_NOTE, 0)


def _newest_message(request: SummaryRequest) -> Item | None:
    """The range's newest message that says something ("Checked 3 places; tests pass so far."), as a note."""
    for event in reversed(request.events):
        if event.type in ("assistant_output", "role_output", "user_input", "system_event"):
            text = clip(event.content, TOOL_NOTE_CHARS)
            # A routine "continue, step 12" is the open thread's (and superseded by the next step's).
            if not is_junk_line(text) and not is_routine_request(text):
                return Item("notes", text, R_NOTE, 0)
    return None


def _add_open_thread(collector: Collector) -> None:
    if collector.last_user:
        collector.add("open", f"User: {collector.last_user}")
    if collector.last_plan:
        # The plan sentence often carries its own label ("Plan: next I will ..."): never "Plan: Plan:".
        plan = re.sub(r"^\s*plan\s*:\s*", "", collector.last_plan, flags=re.IGNORECASE)
        collector.add("open", f"Plan: {plan}")


_MERGE_HEADROOM: Final = 4  # a merge keeps up to this many times the line cap; the caller folds past the cap
_MERGE_TOKENS: Final = 1_000_000  # the merge is bounded by lines, not tokens


def rolling_fold(rolling: str, summary: str, max_lines: int) -> str:
    """``summary`` merged into the rolling summary ``rolling``: the fold of every push out of Recent Chunks.

    Items are filed under the rolling summary's sections and deduplicated, so
    no chunk marker, tool-result excerpt or split-turn block is appended raw.
    The result may exceed ``max_lines``: the line cap is the caller's to enforce.
    """
    merger = ExtractiveSummarizer(fold_max_lines=max(1, max_lines) * _MERGE_HEADROOM)
    request = SummaryRequest(
        purpose="rolling_fold", text=summary, previous_summary=rolling, max_tokens=_MERGE_TOKENS
    )
    return merger.summarize_sync(request).text


_ROLLING_COMMANDS: Final = 5  # the newest distinct commands a fold keeps (older ones are in the archive)


def summary_must_keep(text: str, *, max_items: int) -> list[str]:
    """The load-bearing lines of a summary text, most important first, at most ``max_items``.

    Constraints, preferences, decisions, errors with their resolution and
    failed approaches, parsed as a rolling fold parses them.
    """
    if max_items <= 0:
        return []
    collector = Collector()
    collector.read_summary(text)
    load_bearing = [
        item
        for item in dedupe(collector.finish()).kept
        if item.rank <= R_FAILED and item.section not in ("goal", "open", "outcome")
    ]
    load_bearing.sort(key=lambda it: (it.rank, it.order))
    return [line_of(item) for item in load_bearing[:max_items]]


def _keep_latest_open(items: list[Item]) -> list[Item]:
    # Older open threads are superseded by newer ones. A superseded user request stays as a
    # low-priority request: it may quote a detail not classified anywhere else.
    opens = [it for it in items if it.section == "open"]
    stale = {id(it) for it in opens[:-2]}
    out: list[Item] = []
    for item in items:
        if id(item) not in stale:
            out.append(item)
        elif item.text.startswith("User: "):
            out.append(msgspec.structs.replace(item, section="requests", text=item.text[6:], rank=R_REST))
    return out


def _newest_commands(items: list[Item]) -> list[Item]:
    """``items`` with the commands cut to the newest few distinct ones, each at its newest place;
    a read-only call whose targets are under Files is dropped."""
    files = {normalize(it.text) for it in items if it.section == "files"}
    latest: dict[str, Item] = {}
    for item in items:
        if item.section != "commands":
            continue
        read_only = is_read_only_command(item.text)
        if read_only and all(normalize(p) in files for p in find_paths(item.text.removeprefix("$ "))):
            continue
        key = normalize(item.text)
        latest.pop(key, None)  # re-inserted: the dict's order is the order of last use
        latest[key] = item
    kept = {id(it) for it in list(latest.values())[-_ROLLING_COMMANDS:]}
    return [it for it in items if it.section != "commands" or id(it) in kept]
