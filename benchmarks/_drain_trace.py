"""Where an append's latency goes during a backlog drain (``bench_backlog_drain.py --trace``).

Diagnosis only, never part of a reported figure (it perturbs what it measures):

- *spans*: the writer's batch (lock wait, write, fsync), every session/compaction
  lock hold, and the pass's phases (snapshot, planning, summarizing, must-keep,
  commit, trim), each with its thread and perf_counter start/end, installed by
  wrapping the functions in place;
- *loop lag*: a task sleeping 1 ms records every overshoot above 3 ms;
- *stacks*: a daemon thread samples every thread's top frames every 2 ms.

:func:`report` prints, for the slowest appends, the append's own timeline
(call, batch start, lock held, write, fsync, batch end, ack) and what every
other thread was doing meanwhile (spans overlapping, the most frequent stacks).
"""

from __future__ import annotations

import collections
import functools
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

Span = tuple[str, str, float, float]  # (kind, thread, start, end)

spans: list[Span] = []
lag: list[tuple[float, float]] = []
stacks: list[tuple[float, str, tuple[str, ...]]] = []
_patched: list[tuple[Any, str, Any]] = []


def _wrap(owner: Any, name: str, kind: str | Callable[..., str]) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            label = kind(*args) if callable(kind) else kind
            spans.append((label, threading.current_thread().name, t0, time.perf_counter()))

    _patched.append((owner, name, original))
    setattr(owner, name, traced)


def _wrap_async(owner: Any, name: str, kind: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            spans.append((kind, "loop", t0, time.perf_counter()))

    _patched.append((owner, name, original))
    setattr(owner, name, traced)


_gc_started: list[float] = []


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started.append(time.perf_counter())
    elif _gc_started:
        start = _gc_started.pop()
        spans.append(
            (f"gc.gen{info['generation']}", threading.current_thread().name, start, time.perf_counter())
        )


def install() -> None:
    """Wrap the functions whose spans are recorded (and record every garbage collection)."""
    gc.callbacks.append(_on_gc)
    from aiden.actors import planning, scheduler, summarizer
    from aiden.storage import eventlog, fs, jsonl, locks, session
    from aiden.summarizers.extractive import summarizer as ext

    _wrap(eventlog.EventLog, "append", "append.batch")
    _wrap(eventlog.EventLog, "_sync_file_state", "append.sync")
    _wrap(fs.Storage, "fsync", lambda self, fd: f"fsync.{threading.current_thread().name}")
    _wrap(fs.Storage, "write", lambda self, fd, data: f"write.{threading.current_thread().name}")
    _wrap(fs.Storage, "fsync_dir", lambda self, p: f"fsync_dir.{threading.current_thread().name}")
    _wrap(locks.SessionLock, "acquire", lambda self, t: f"lockwait.{self._path.name}")

    original_release = locks.SessionLock.release
    original_acquire = locks.SessionLock.acquire
    held: dict[int, float] = {}

    def acquire(self: Any, timeout: float) -> None:
        original_acquire(self, timeout)
        held[id(self)] = time.perf_counter()

    def release(self: Any) -> None:
        start = held.pop(id(self), None)
        original_release(self)
        if start is not None:
            spans.append(
                (f"held.{self._path.name}", threading.current_thread().name, start, time.perf_counter())
            )

    _patched.append((locks.SessionLock, "acquire", original_acquire))
    _patched.append((locks.SessionLock, "release", original_release))
    locks.SessionLock.acquire = acquire  # type: ignore[method-assign]
    locks.SessionLock.release = release  # type: ignore[method-assign]

    _wrap(session.FileSessionStore, "snapshot", "pass.snapshot")
    _wrap(session.FileSessionStore, "commit", "pass.commit")
    _wrap(session, "trim_hot_window", "pass.trim")
    _wrap(eventlog, "scan_seqs", "trim.scan_seqs")
    _wrap(jsonl, "scan", "jsonl.scan")
    _wrap(planning, "plan_compaction", "pass.plan")
    _wrap(planning.TokenCounts, "of", "pass.token_counts")
    _wrap_async(planning.Planner, "survey", "pass.survey")
    _wrap_async(scheduler.MaintenanceScheduler, "_pass", "pass")
    _wrap_async(summarizer.ChunkSummaries, "_with_must_keep", "pass.must_keep")
    _wrap_async(summarizer.ChunkSummaries, "summarize", "pass.summarize")
    _wrap(ext.ExtractiveSummarizer, "_finish", "extractive.finish")


def uninstall() -> None:
    """Undo :func:`install` (newest first) and clear the records."""
    if _on_gc in gc.callbacks:
        gc.callbacks.remove(_on_gc)
    while _patched:
        owner, name, original = _patched.pop()
        setattr(owner, name, original)
    spans.clear()
    lag.clear()
    stacks.clear()


async def lag_sampler(stop: anyio.Event) -> None:
    """Record (time, overshoot) of a 1 ms sleep whenever it overshoots by more than 3 ms."""
    while not stop.is_set():
        t0 = time.perf_counter()
        await anyio.sleep(0.001)
        over = time.perf_counter() - t0 - 0.001
        if over > 0.003:
            lag.append((t0, over))


def _frames(frame: Any, depth: int = 6) -> tuple[str, ...]:
    out: list[str] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno}:{code.co_name}")
        frame = frame.f_back
    return tuple(out)


@contextmanager
def stack_sampler(interval: float = 0.002) -> Iterator[None]:
    """Sample every thread's top frames every ``interval`` s while the block runs."""
    stop = threading.Event()
    names = {}

    def run() -> None:
        me = threading.get_ident()
        while not stop.wait(interval):
            now = time.perf_counter()
            for t in threading.enumerate():
                names[t.ident] = t.name
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    stacks.append((now, names.get(ident, str(ident)), _frames(frame)))

    thread = threading.Thread(target=run, name="trace-sampler", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def report(appends: list[tuple[float, float]], worst: int = 5) -> str:
    """The timeline of the ``worst`` slowest appends ((call, ack) perf_counter pairs)."""
    out: list[str] = []
    full = [t1 - t0 for kind, _, t0, t1 in spans if kind == "gc.gen2"]
    if full:
        out.append(
            f"full garbage collections: {len(full)}, max {1e3 * max(full):.1f} ms, total {1e3 * sum(full):.1f} ms"
        )
    batches = sorted((s for s in spans if s[0] == "append.batch"), key=lambda s: s[2])
    for call, ack in sorted(appends, key=lambda a: a[0] - a[1])[:worst]:
        out.append(f"\n=== append {1e3 * (ack - call):.1f} ms (call at {call:.3f})")
        mine = [b for b in batches if b[2] >= call and b[3] <= ack]
        if mine:
            b = mine[0]
            out.append(
                f"  writer got batch +{1e3 * (b[2] - call):.1f} ms, batch took {1e3 * (b[3] - b[2]):.1f} ms,"
                f" ack delivered +{1e3 * (ack - b[3]):.1f} ms after batch end"
            )
        for kind, thread, t0, t1 in sorted(spans, key=lambda s: s[2]):
            if t1 >= call and t0 <= ack and kind != "append.batch" and t1 - t0 > 0.0005:
                out.append(
                    f"  {kind:<32} {thread:<24} +{1e3 * (t0 - call):7.1f} .. +{1e3 * (t1 - call):7.1f}"
                    f" ({1e3 * (t1 - t0):.1f} ms)"
                )
        for t0, over in lag:
            if call <= t0 <= ack:
                out.append(f"  loop lag {1e3 * over:.1f} ms at +{1e3 * (t0 - call):.1f}")
        by_thread: dict[str, collections.Counter[tuple[str, ...]]] = collections.defaultdict(
            collections.Counter
        )
        for t, thread, frames in stacks:
            if call <= t <= ack:
                by_thread[thread][frames[:4]] += 1
        for thread, counter in by_thread.items():
            for frames, n in counter.most_common(3):
                out.append(f"  [{thread}] x{n}: {' < '.join(frames)}")
    return "\n".join(out)
