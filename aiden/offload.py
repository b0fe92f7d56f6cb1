"""CPU-bound pure functions run in a helper process: a long one never holds this process's GIL.

A process, not a thread: in a worker thread a long extraction holds the GIL, and every GIL
hand-off of the event loop and the writer's thread then waits out the switch interval.

One long-lived child per process, started on first use, runs one job at a time: a
length-prefixed msgpack :class:`Job` (a name from :data:`JOBS`, no code) on its stdin, a
:class:`Done` or :class:`JobFailed` on its stdout. It exits when its stdin closes or after
:data:`IDLE_EXIT_S` idle. Any failure raises :class:`OffloadUnavailable`, and the caller runs the
same function in this process; after a failed start none is tried for :data:`RETRY_AFTER_S`.
"""

from __future__ import annotations

import atexit
import importlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Final

import anyio
import msgspec

from aiden.events import SessionEvent

__all__ = ["JOBS", "Done", "Job", "JobFailed", "OffloadUnavailable", "run_job", "too_long_for_the_loop"]

JOBS: Final[dict[str, str]] = {
    "extractive": "aiden.summarizers.extractive.summarizer:run_job",
    "must_keep": "aiden.summarizers.mustkeep.check:run_job",
    "plan": "aiden.actors.planning:run_job",
}
"""The functions a child may run, by job name: ``bytes -> bytes``, pure, importable by name."""

INLINE_EVENTS: Final = 200
INLINE_CHARS: Final = 4_000
"""Up to this many events and characters of text, a summary or must-keep step runs on the loop
(see BENCHMARKS.md, "Event-loop stalls on real sessions")."""

MAX_WAITING: Final = 1
"""Jobs that may wait behind the one the helper runs; more are refused (the caller runs them itself).

When many sessions compact at once, a queue would make each wait for all the others.
"""
IDLE_EXIT_S: Final = 300.0
RETRY_AFTER_S: Final = 60.0
_HEADER: Final = 4
_MAX_FRAME: Final = 1 << 30


def too_long_for_the_loop(events: Sequence[SessionEvent], text_chars: int = 0) -> bool:
    """Whether pure-Python work over ``events`` (and ``text_chars`` more text) should run in the helper.

    Work that cannot be sliced (dedupe, selection, the must-keep scan) grows with the events and
    faster than their text, so both count.
    """
    if len(events) > INLINE_EVENTS:
        return True
    for event in events:
        text_chars += len(event.content) + len(event.tool_args or "")
        if text_chars > INLINE_CHARS:
            return True
    return text_chars > INLINE_CHARS


class OffloadUnavailable(Exception):
    """The job could not be run in the helper process: run it in this one.

    Internal: never leaves aiden (every caller falls back), so it is no AidenError.
    """


class Job(msgspec.Struct, frozen=True, tag=True):
    """Run the function ``JOBS[name]`` on ``payload``."""

    name: str
    payload: bytes


class Done(msgspec.Struct, frozen=True, tag=True):
    """The job's encoded result."""

    result: bytes


class JobFailed(msgspec.Struct, frozen=True, tag=True):
    """The job raised in the child (its type and message)."""

    error: str


_encoder = msgspec.msgpack.Encoder()
_job_decoder = msgspec.msgpack.Decoder(Job)
_reply_decoder = msgspec.msgpack.Decoder(Done | JobFailed)


def _write_frame(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(_HEADER, "big") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    parts: list[bytes] = []
    while n:
        part = os.read(fd, min(n, 1 << 20))
        if not part:
            raise EOFError("pipe closed")
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _read_frame(fd: int) -> bytes:
    size = int.from_bytes(_read_exact(fd, _HEADER), "big")
    if size > _MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    return _read_exact(fd, size)


# --- this process's side --------------------------------------------------------------


class _Child:
    """The helper process and the lock that lets one request at a time talk to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._state = threading.Lock()  # guards the job bookkeeping below (never held while waiting)
        self._queued: set[object] = set()
        self._busy: object | None = None  # the job being sent or answered
        self._running: subprocess.Popen[bytes] | None = None  # the child it was sent to
        self._give_up = False  # its caller gave up: abort() ended that child, it is not broken
        self._answered = False  # the current child answered a job
        self._no_start_until = 0.0
        self.started = 0
        """How many children were started (tests check that one is reused)."""

    def call(self, name: str, payload: bytes, token: object) -> bytes:
        """Blocking: send one job, wait for its reply. Run in a worker thread."""
        with self._lock:
            with self._state:
                if token not in self._queued:
                    raise OffloadUnavailable("the caller gave up before the job was sent")
                self._queued.discard(token)
                self._busy = token
            try:
                proc = self._ensure()
                with self._state:
                    if self._give_up:
                        raise OffloadUnavailable("the caller gave up before the job was sent")
                    self._running = proc
                assert proc.stdin is not None and proc.stdout is not None
                _write_frame(proc.stdin.fileno(), _encoder.encode(Job(name, payload)))
                reply = _reply_decoder.decode(_read_frame(proc.stdout.fileno()))
                self._answered = True
            except (OSError, EOFError, ValueError, msgspec.DecodeError) as exc:
                if not self._answered and not self._give_up:
                    # A child that never answered will not answer the next job either.
                    self._no_start_until = time.monotonic() + RETRY_AFTER_S
                self._stop()
                raise OffloadUnavailable(f"helper process lost: {exc}") from exc
            finally:
                with self._state:
                    self._busy, self._running, self._give_up = None, None, False
        if isinstance(reply, JobFailed):
            raise OffloadUnavailable(f"{name} failed in the helper process: {reply.error}")
        return reply.result

    def queue(self, token: object) -> None:
        """Register a job before its thread runs :meth:`call` (so :meth:`abort` can drop it unsent).

        Raises :class:`OffloadUnavailable` when :data:`MAX_WAITING` jobs already wait.
        """
        with self._state:
            if len(self._queued) - (self._busy is None) >= MAX_WAITING:
                raise OffloadUnavailable("the helper process is busy")
            self._queued.add(token)

    def abort(self, token: object) -> None:
        """The caller of ``token`` gave up: drop the job if unsent, end the child if it runs it."""
        with self._state:
            self._queued.discard(token)
            if self._busy is not token:
                return
            self._give_up = True
            proc = self._running
        if proc is not None:
            proc.kill()

    def _ensure(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        if proc is not None:
            self._stop()
        if time.monotonic() < self._no_start_until:
            raise OffloadUnavailable("the helper process could not be started recently")
        is_python = os.path.basename(sys.executable).lower().startswith(("python", "pypy"))
        if not is_python or getattr(sys, "frozen", False):
            # Embedded hosts (uWSGI, a frozen app) name their own binary here: never run that.
            self._no_start_until = float("inf")
            raise OffloadUnavailable(
                f"no Python interpreter to start a helper process with ({sys.executable!r})"
            )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.curdir for p in sys.path))
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", "from aiden.offload import main; main()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                close_fds=True,
            )
        except OSError as exc:
            self._no_start_until = time.monotonic() + RETRY_AFTER_S
            raise OffloadUnavailable(f"cannot start the helper process: {exc}") from exc
        self.started += 1
        self._answered = False
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        """End the child (at interpreter exit): its stdin closes, so it exits.

        A job still running (its caller gave up) is not waited for long: the child is killed.
        """
        if self._lock.acquire(timeout=2.0):
            try:
                self._stop()
            finally:
                self._lock.release()
        elif (proc := self._proc) is not None:
            proc.kill()


_CHILD = _Child()
atexit.register(_CHILD.close)


async def run_job(name: str, payload: bytes) -> bytes:
    """``JOBS[name](payload)`` in the helper process; :class:`OffloadUnavailable` when it cannot run there.

    Cancellable: the child, still busy with an abandoned job, is ended so the next job does not
    queue behind it.
    """
    if name not in JOBS:
        raise ValueError(f"unknown offload job {name!r}")
    token = object()
    _CHILD.queue(token)
    try:
        return await anyio.to_thread.run_sync(_CHILD.call, name, payload, token, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        _CHILD.abort(token)
        raise


# --- the child's side -------------------------------------------------------------------


def serve(stdin: int, stdout: int) -> None:
    """The child's loop: read a job, run it, write the reply; return at EOF or after :data:`IDLE_EXIT_S` idle."""
    while select.select([stdin], [], [], IDLE_EXIT_S)[0]:
        try:
            job = _job_decoder.decode(_read_frame(stdin))
        except EOFError:
            return
        try:
            module, _, function = JOBS[job.name].partition(":")
            reply: Done | JobFailed = Done(getattr(importlib.import_module(module), function)(job.payload))
        except Exception as exc:  # reported to the caller, which runs the job itself
            reply = JobFailed(f"{type(exc).__name__}: {exc}")
        _write_frame(stdout, _encoder.encode(reply))


def main() -> None:
    """Entry point of the helper process (started by :func:`run_job`, not by people)."""
    # Ctrl-C reaches the whole process group; the parent decides, and its exit closes our stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    sys.stdout = sys.stderr  # the pipe carries frames only: a stray print goes to stderr
    serve(stdin, stdout)
