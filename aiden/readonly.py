"""Read-only views of a memory root for the ``aiden`` command: inspect, export, recall.

Nothing here opens the memory (no lock, no recovery) or writes under the root, so it works
on a read-only root and beside a running agent. Reads stay inside the root
(:func:`open_layout`); what a read skips goes to a ``problems`` list for the command to say
on stderr. Progress goes to stderr too, since stdout carries the output.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO, TypeVar

from aiden.errors import CorruptionError
from aiden.events import SessionEvent, encode_event
from aiden.recall.tool import RecallHit
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from aiden.storage.recovery import archived_layout

_T = TypeVar("_T")

__all__ = [
    "OutsideRootError",
    "RootError",
    "escaping_paths",
    "export_lines",
    "has_memory",
    "hot_events",
    "inspect_root",
    "iter_events",
    "load_entries",
    "open_layout",
    "Progress",
    "ProgressFactory",
    "progress_enabled",
    "recall",
    "report_problems",
]


def report_problems(command: str, problems: list[str]) -> int:
    """Say each problem on stderr, one line each; the exit code: 1 if there was any, else 0."""
    for problem in problems:
        print(f"aiden {command}: {' '.join(problem.split())}", file=sys.stderr)
    return 1 if problems else 0


def progress_enabled(flag: bool | None, stream: TextIO | None = None) -> bool:
    """``--progress`` / ``--no-progress`` as given, else on when ``stream`` (stderr) is a terminal."""
    if flag is not None:
        return flag
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Progress:
    """Counts ``done`` of ``total`` units of ``what`` (e.g. ``"chunk files"``) under ``label``.

    On a terminal one line is rewritten in place; into a file or pipe it prints at most one
    line per tenth of the work, so a log stays readable.
    """

    def __init__(self, label: str, what: str, total: int, *, stream: TextIO | None = None) -> None:
        self._label = label
        self._what = what
        self._total = total
        self._done = 0
        self._enabled = total > 0
        self._stream = sys.stderr if stream is None else stream
        self._tty = self._enabled and progress_enabled(None, self._stream)
        self._shown = -1  # the last step printed: a hundredth on a terminal, else a tenth

    def advance(self) -> None:
        """One more unit done."""
        self._done = min(self._total, self._done + 1)
        if not self._enabled:
            return
        step = self._done * (100 if self._tty else 10) // self._total
        if step == self._shown:
            return
        self._shown = step
        text = f"{self._label}: {self._done}/{self._total} {self._what}"
        if self._tty:
            self._stream.write("\r" + text + ("\n" if self._done == self._total else ""))
        else:
            self._stream.write(text + "\n")
        self._stream.flush()


class RootError(Exception):
    """The given root does not exist or holds no memory."""


class OutsideRootError(CorruptionError):
    """A path under ``memory/`` leads out of it (a symlink): read commands refuse to follow it."""


def escaping_paths(layout: Layout) -> list[str]:
    """``"memory/<path> -> <target>"`` for each symlink under ``memory/`` that resolves outside it."""
    base = layout.memory
    if not Path(os.path.realpath(base)).is_relative_to(base):
        return [f"memory -> {os.path.realpath(base)}"]
    found: list[str] = []
    for dirpath, dirs, names in os.walk(base):  # does not descend into symlinked directories
        for name in (*dirs, *names):
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and not Path(target := os.path.realpath(path)).is_relative_to(base):
                found.append(f"memory/{os.path.relpath(path, base)} -> {target}")
    return sorted(found)


def has_memory(root: str | os.PathLike[str]) -> bool:
    """True if ``<root>/memory/`` exists and is not empty."""
    memory = Path(os.fspath(root)) / "memory"
    try:
        return memory.is_dir() and any(memory.iterdir())
    except OSError:
        return True  # unreadable: treat as holding something, never overwrite it


def open_layout(root: str | os.PathLike[str], *, confined: bool = True) -> Layout:
    """The :class:`Layout` of an existing memory root; :class:`RootError` when there is none.

    ``confined``: :class:`OutsideRootError` when a symlink under ``memory/`` leads out of the root.
    """
    path = Path(os.fspath(root))
    if not path.is_dir():
        raise RootError(f"memory root {os.fspath(root)!r} does not exist or is not a directory")
    layout = Layout(path)
    if not layout.memory.is_dir():
        raise RootError(f"no memory under {os.fspath(root)!r} (expected a memory/ directory)")
    if confined and (escapes := escaping_paths(layout)):
        raise OutsideRootError(
            f"memory root {os.fspath(root)!r} holds symlinks that lead out of it, refused (remove them; "
            f"aiden doctor lists them): {'; '.join(escapes)}"
        )
    return layout


def load_entries(
    layout: Layout, problems: list[str] | None = None
) -> tuple[cs.ChunkIndex, list[cs.ChunkEntry]]:
    """The chunk index and every entry (sealed segments included), oldest first.

    A chunk file the index does not list (a deleted index, a crash's or a running agent's
    uncommitted chunk) is not read, and is named in ``problems``: only the next open's
    recovery can tell whether its events are stored elsewhere.
    """
    index = cs.load_index(layout) or cs.ChunkIndex()
    entries = cs.load_all_entries(layout, index)
    listed = {e.chunk_id for e in entries}
    if problems is not None and (unlisted := [c for c in cs.list_chunk_files(layout) if c not in listed]):
        problems.append(
            f"{len(unlisted)} chunk files in session/chunks/ are not in index.yaml and were not read "
            f"(the next open of the memory adopts or removes them): {', '.join(unlisted)}"
        )
    return index, entries


def hot_events(
    layout: Layout,
    index: cs.ChunkIndex,
    entries: list[cs.ChunkEntry],
    problems: list[str] | None = None,
    *,
    data: bytes | None = None,
) -> list[SessionEvent]:
    """The hot window as the session store reads it (events a committed chunk covers left out).

    ``data``: events.jsonl's bytes, read before ``index`` (else read now). Beside a running agent
    read it first: a compaction committing between the two reads then shows its events in both,
    and the ones the index covers are left out here; read after the index they are in neither.

    A damaged line is skipped and named in ``problems``. A torn tail is left out silently: it
    was never acknowledged, and beside a running agent it may be a write in flight."""
    found = scan(read_bytes(layout.events) if data is None else data)
    if problems is not None:
        problems.extend(
            f"session/events.jsonl: skipped a damaged line at byte {bad.offset} ({len(bad.raw)} bytes): {bad.error}"
            for bad in found.bad_lines
        )
    last = index.last_seq
    return [e for e in found.events if e.seq > last or not cs.covered(entries, e.seq)]


ProgressFactory = Callable[[int], Progress]
"""Given how many units the work has, the :class:`Progress` to advance."""


def iter_events(
    layout: Layout, progress: ProgressFactory | None = None, problems: list[str] | None = None
) -> Iterator[SessionEvent]:
    """Every stored event in seq order, one chunk file in memory at a time: chunks (verified) merged with the hot window.

    Pinned events inside a compacted range stay in the hot window, hence a merge; a later chunk
    that compacts such an event holds it below the seqs of the chunks before it: those few events
    are read first. Beside a running agent this reads the session it started on: a rotation
    meanwhile moves that session into the archive, where the rest of it is read.
    """
    start = _folder_id(layout.session)
    layout, (data, (index, entries), read) = _one_session(layout, start, _read_session)
    if problems is not None:
        problems.extend(read)
    hot = sorted(hot_events(layout, index, entries, problems, data=data), key=lambda e: e.seq)
    bar = progress(len(entries)) if progress is not None else None
    at = layout

    def events_of(entry: cs.ChunkEntry) -> list[SessionEvent]:
        nonlocal at
        try:
            return cs.read_chunk(at, entry.chunk_id, expect_sha256=entry.sha256).events
        except CorruptionError:
            moved = _follow(at, start)
            if moved is at:
                raise
            at = moved
            return cs.read_chunk(at, entry.chunk_id, expect_sha256=entry.sha256).events

    # floors[i]: the highest seq the chunks before entry i end at. A chunk's events above its floor
    # follow every event before them; the ones at or below it (a chunk starts at its first event)
    # are merged as a stream of their own.
    floors = list(itertools.accumulate((e.last_seq for e in entries), max, initial=0))[:-1]
    early = sorted(
        (
            e
            for entry, floor in zip(entries, floors, strict=True)
            if entry.first_seq <= floor
            for e in events_of(entry)
            if e.seq <= floor
        ),
        key=lambda e: e.seq,
    )

    def chunked() -> Iterator[SessionEvent]:
        for entry, floor in zip(entries, floors, strict=True):
            yield from (e for e in events_of(entry) if e.seq > floor)
            if bar is not None:
                bar.advance()

    yield from heapq.merge(chunked(), early, hot, key=lambda e: e.seq)


def _read_session(layout: Layout) -> tuple[bytes, tuple[cs.ChunkIndex, list[cs.ChunkEntry]], list[str]]:
    """events.jsonl's bytes, then (see :func:`hot_events`) the index and its entries; what :func:`load_entries` said."""
    read: list[str] = []
    data = read_bytes(layout.events)
    return data, load_entries(layout, read), read


def _one_session(layout: Layout, start: tuple[int, int] | None, read: Callable[[Layout], _T]) -> tuple[Layout, _T]:
    """``read(layout)`` of one session's files: the session whose folder was ``start``, and its layout.

    A rotation during the read moves that folder into the archive: read again there, where it no
    longer changes, so no figure mixes two sessions.
    """
    while True:
        got = read(layout)
        moved = _follow(layout, start)
        if moved is layout:
            return layout, got
        layout = moved


def _folder_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _follow(layout: Layout, start: tuple[int, int] | None) -> Layout:
    """``layout`` itself while its session folder is still ``start``, else the archived session that is.

    Rotation renames ``session/`` into ``session_archive/<id>/``: the folder, and every file in it, stays.
    """
    if start is None or _folder_id(layout.session) == start:
        return layout
    try:
        archived = [Path(e.path) for e in os.scandir(layout.archive) if e.is_dir(follow_symlinks=False)]
    except OSError:
        archived = []
    for path in archived:
        if _folder_id(path) == start:
            return archived_layout(layout, path)
    raise CorruptionError(
        "the session folder was moved while it was read (a rotation?) and no archived session is it; run the command again"
    )


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _files(layout: Layout) -> dict[str, int]:
    paths = (Path(dirpath) / name for dirpath, _dirs, names in os.walk(layout.memory) for name in names)
    sizes = {str(path.relative_to(layout.memory)): size for path in paths if (size := _size(path)) is not None}
    return dict(sorted(sizes.items()))


def _summary_layer(summary: bytes, window: int, model: str | None) -> dict[str, Any]:
    from aiden.config import Config
    from aiden.policy.tokens import estimate_tokens, profile_for_model

    # As build_messages: summary.md, stripped, is the summary layer; past its cap a prompt gets the newest lines.
    text = summary.decode("utf-8", errors="replace").strip()
    tokens = estimate_tokens(text, profile_for_model(model))
    config = Config(context_window=window)
    return {
        "tokens": tokens,
        "context_window": window,
        "share_percent": round(100 * tokens / window, 1),
        "cap_percent": config.summary_layer_percent,
        "cap_tokens": config.summary_layer_tokens(),
        "cut_in_prompt": tokens > config.summary_layer_tokens(),
    }


def _archived_sessions(layout: Layout) -> int:
    try:
        return sum(1 for e in os.scandir(layout.archive) if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return 0


def inspect_root(
    root: str | os.PathLike[str], *, context_window: int | None = None, model: str | None = None
) -> dict[str, Any]:
    """A summary of what the root holds, as plain JSON-able data. Read-only.

    The summary layer's share is of ``context_window``, else of ``model``'s window (a model
    litellm's map does not know is a problem: the default window), else of the window the memory
    was last opened with, else of the default; ``model`` (else the recorded one) also picks the
    token estimator. Beside an agent, every figure is of one session (see :func:`iter_events`).
    """
    from aiden.config import Config, ModelResolver
    from aiden.policy.tokens import event_tokens, profile_for_model
    from aiden.storage.advisory import read_last_recovery, read_window

    layout = open_layout(root)
    recorded = read_window(layout)
    unknown: list[str] = []
    if context_window is not None:
        window, source = context_window, "--context-window"
    elif model is not None:
        known = ModelResolver().lookup(model)
        window, source = (known, "--model") if known is not None else (Config().context_window, "the default")
        if known is None:
            unknown.append(f"--model {model!r} is not in litellm's model map: the default window is used")
    elif recorded is not None:
        window, model, source = recorded["context_window"], recorded["model"], "the last open"
    else:
        window, source = Config().context_window, "the default"

    def read(at: Layout) -> tuple[bytes, tuple[cs.ChunkIndex, list[cs.ChunkEntry]], list[str], bytes]:
        try:
            data, loaded, said = _read_session(at)
        except CorruptionError as exc:  # a damaged index is a problem to report, not the end of inspect
            data, loaded, said = read_bytes(at.events), (cs.ChunkIndex(), []), [str(exc)]
        return data, loaded, said, read_bytes(at.summary)

    # Beside an agent rotating sessions: every figure of the session the root held at the start.
    at, (data, (index, entries), said, summary) = _one_session(layout, _folder_id(layout.session), read)
    problems = [*unknown, *said]
    hot = hot_events(at, index, entries, problems, data=data)
    memories = layout.memories
    long_term = [p for p in memories.glob("*.md") if p.is_file()] if memories.is_dir() else []
    compacted = sum(e.count for e in entries)
    return {
        "root": str(layout.root),
        "hot_window": {
            "events": len(hot),
            "first_seq": hot[0].seq if hot else None,
            "last_seq": hot[-1].seq if hot else None,
        },
        "chunks": {
            "count": len(entries),
            "live": len(index.chunks),
            "segments": len(index.segments),
            "first_seq": entries[0].first_seq if entries else None,
            "last_seq": entries[-1].last_seq if entries else None,
            "events": compacted,
        },
        "summary_md_bytes": len(summary),
        "summary_layer": {**_summary_layer(summary, window, model), "window_from": source},
        "stats": {
            "events": compacted + len(hot),
            "compactions": len(entries),
            "degraded_chunks": sum(1 for e in entries if e.degraded),
            "hot_window_tokens": sum(event_tokens(hot, profile_for_model(model))),
            "archived_sessions": _archived_sessions(layout),
        },
        "last_recovery": read_last_recovery(layout),
        "long_term_entries": len(long_term),
        "files": _files(layout),
        "problems": problems,
    }


def export_lines(
    root: str | os.PathLike[str],
    fmt: str = "jsonl",
    progress: ProgressFactory | None = None,
    problems: list[str] | None = None,
) -> Iterator[str]:
    """Every event as one JSON line (``jsonl``) or as OpenAI chat messages (``openai``), one per line.

    ``jsonl`` streams, and a damaged chunk raises :class:`~aiden.errors.CorruptionError`
    after the lines before it. ``openai`` pairs tool calls with their results across the
    whole session, so it reads every event first.
    """
    if fmt not in ("jsonl", "openai"):
        raise ValueError(f"unknown export format {fmt!r} (jsonl or openai)")
    layout = open_layout(root)
    events = iter_events(layout, progress, problems)
    if fmt == "jsonl":
        for event in events:
            yield encode_event(event).decode("utf-8").rstrip("\n")
        return
    from aiden.context.prompt import events_to_messages

    messages, _repairs = events_to_messages(list(events))
    for message in messages:
        yield json.dumps(message, ensure_ascii=False)


def recall(
    root: str | os.PathLike[str], query: str, *, k: int | None = None, problems: list[str] | None = None
) -> list[RecallHit]:
    """Search the root's compacted events with an index built in a temp dir (the root is not written).

    ``problems`` receives the chunk files left out of the search (see :func:`load_entries`)."""
    from aiden.config import Config
    from aiden.recall.index import BulkChunk, RecallIndex

    layout = open_layout(root)
    entries = load_entries(layout, problems)[1]
    bulk = [
        BulkChunk(
            chunk_id=e.chunk_id,
            sha256=e.sha256,
            summary=e.summary,
            events=cs.read_chunk(layout, e.chunk_id, expect_sha256=e.sha256).events,
            degraded=e.degraded,
        )
        for e in entries
    ]
    with tempfile.TemporaryDirectory(prefix="aiden-recall-") as tmp:
        tmp_layout = Layout(tmp)
        tmp_layout.session.mkdir(parents=True)
        index = RecallIndex(tmp_layout, Config())
        try:
            index.bulk_load(bulk)
            return index.search(query, k=k)
        finally:
            index.close()
