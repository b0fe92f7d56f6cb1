"""Shared machinery of the reliability suite: reading a session back, the invariant checker, child processes.

Every reliability test funnels what it stored and what was acknowledged into
:func:`check`, and the self-check tests feed the *same* function deliberately
broken variants to prove it can fail.

Events written by the suite carry a unique *tag* as the first word of their
content (``"c:17 fix module ..."``), so an event can be followed across
processes, chunks, the hot window and archived sessions whatever seq it got.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, CorruptionError
from aiden.events import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout

REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD_SCRIPT = Path(__file__).resolve().with_name("child.py")


# --------------------------------------------------------------------------
# run modes
# --------------------------------------------------------------------------


def full_mode(config: Any | None = None) -> bool:
    """True with ``--run-slow`` (when the option is registered) or ``AIDEN_RELIABILITY_FULL=1``."""
    if os.environ.get("AIDEN_RELIABILITY_FULL", "") not in ("", "0"):
        return True
    if config is not None:
        try:
            return bool(config.getoption("--run-slow"))
        except ValueError:
            return False
    return False


def reliability_config(*, lock_timeout_s: float) -> Config:
    """The small, durable configuration the reliability tests share: compacts after a few events."""
    return Config(
        durability="fsync",
        keep_recent_tokens=60,
        hot_window_events=6,
        count_compress_after_events=10**6,
        summary_max_chunks=3,
        lock_timeout_s=lock_timeout_s,
    )


def report(title: str, **figures: Any) -> None:
    """Print one figures line (visible with ``pytest -s``)."""
    body = ", ".join(f"{k}={v}" for k, v in figures.items())
    print(f"\n[reliability] {title}: {body}", flush=True)


# --------------------------------------------------------------------------
# tagged events
# --------------------------------------------------------------------------

_WORDS = ("parser", "module", "fix", "test", "error", "retry", "config", "deploy", "cache", "index",
          "value", "branch", "commit", "schema", "field", "token", "window", "chunk", "query", "lock")


def tag_of(event: SessionEvent) -> str:
    """The tag of an event written by this suite ('' for anything else)."""
    return event.content.split(" ", 1)[0] if event.content else ""


def tagged_event(tag: str, n: int, rng: random.Random, *, words: tuple[int, int] = (3, 24)) -> SessionEvent:
    """A user/assistant event whose content starts with ``tag``; ``n`` picks the type."""
    body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(*words)))
    if n % 2 == 0:
        return SessionEvent(type="user_input", role="user", content=f"{tag} please {body}")
    return SessionEvent(type="assistant_output", role="assistant", content=f"{tag} done: {body}")


# --------------------------------------------------------------------------
# reading what a root holds (robust: never raises on corrupt data)
# --------------------------------------------------------------------------


def session_layout(root: Path, session_dir: Path | None = None) -> Layout:
    """A Layout of ``root`` whose session paths point at ``session_dir`` (an archived session)."""
    lay = Layout(root)
    if session_dir is not None:
        lay.session = session_dir  # every session path follows it
    return lay


@dataclass
class SessionView:
    """One session as stored: committed chunk events, hot-window events, and problems met reading it."""

    name: str
    chunked: list[SessionEvent] = field(default_factory=list)
    hot: list[SessionEvent] = field(default_factory=list)
    entries: list[cs.ChunkEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    torn_tail: bytes = b""
    bad_lines: int = 0

    @property
    def events(self) -> list[SessionEvent]:
        return self.chunked + self.hot

    @property
    def chunk_ids(self) -> set[str]:
        return {e.chunk_id for e in self.entries}


def read_session(lay: Layout, name: str, *, hot_first: bool = False) -> SessionView:
    """Read a session's chunks and hot window; problems are recorded, never raised.

    ``hot_first`` reads events.jsonl before the index and drops hot events a
    chunk covers: the order that stays consistent while a compaction commits
    concurrently (index first, then the trim).
    """
    view = SessionView(name)
    raw = read_bytes(lay.events) if hot_first else b""
    try:
        index = cs.load_index(lay) or cs.ChunkIndex()
        view.entries = cs.load_all_entries(lay, index)
    except (CorruptionError, AidenError) as exc:
        view.problems.append(f"{name}: index unreadable: {exc}")
        view.entries = []
    for entry in view.entries:
        try:
            chunk = cs.read_chunk(lay, entry.chunk_id, expect_sha256=entry.sha256)
        except (CorruptionError, AidenError) as exc:
            view.problems.append(f"{name}: chunk {entry.chunk_id} unreadable: {exc}")
            continue
        view.chunked.extend(chunk.events)
    if not hot_first:
        raw = read_bytes(lay.events)
    result = scan(raw)
    view.hot = list(result.events)
    if hot_first:
        view.hot = [e for e in view.hot if not cs.covered(view.entries, e.seq)]
    view.torn_tail = result.torn_tail
    view.bad_lines = len(result.bad_lines)
    return view


def read_root(root: Path, *, hot_first: bool = False) -> list[SessionView]:
    """Every session under ``root``: the archived ones (sorted by name), then the active one."""
    lay = Layout(root)
    views: list[SessionView] = []
    if lay.archive.is_dir():
        for d in sorted(lay.archive.iterdir()):
            if d.is_dir() and not d.is_symlink():
                views.append(read_session(session_layout(root, d), f"archive/{d.name}", hot_first=hot_first))
    views.append(read_session(lay, "active", hot_first=hot_first))
    return views


# --------------------------------------------------------------------------
# the invariant checker
# --------------------------------------------------------------------------


@dataclass
class Verdict:
    """What :func:`check` found. ``lost``/``duplicated`` must be empty for a correct aiden."""

    acked: int = 0
    recovered: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    bad_states: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.phantom or self.bad_states)

    def figures(self) -> dict[str, int]:
        return {
            "acknowledged": self.acked,
            "recovered": self.recovered,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "phantom": len(self.phantom),
            "bad_states": len(self.bad_states),
        }

    def explain(self, limit: int = 8) -> str:
        parts = []
        for name in ("lost", "duplicated", "phantom", "bad_states"):
            items = getattr(self, name)
            if items:
                parts.append(f"{name} ({len(items)}): {items[:limit]}")
        return "; ".join(parts) or "ok"

    def merge(self, other: Verdict, label: str = "") -> None:
        pre = f"{label}: " if label else ""
        self.acked += other.acked
        self.recovered += other.recovered
        self.lost += [pre + x for x in other.lost]
        self.duplicated += [pre + x for x in other.duplicated]
        self.phantom += [pre + x for x in other.phantom]
        self.bad_states += [pre + x for x in other.bad_states]


def check_views(
    views: Iterable[SessionView],
    acked: Mapping[str, int],
    allowed: Iterable[str] | None = None,
    *,
    gap_free: bool = True,
    allow_problems: bool = False,
) -> Verdict:
    """The invariant over stored sessions.

    * acknowledged ⊆ recovered (by tag; an acknowledged event keeps its seq),
    * recovered ⊆ acknowledged | in-flight (``allowed``; None = anything tagged goes),
    * no seq twice within a session, no tag twice anywhere,
    * hot window in seq order, chunk ranges ordered and disjoint,
    * each session's seqs gap-free from 1 (``gap_free``).
    """
    v = Verdict(acked=len(acked))
    allowed_set = set(allowed) if allowed is not None else None
    if allowed_set is not None:
        allowed_set |= set(acked)
    found: dict[str, tuple[str, int]] = {}
    tag_counts: Counter[str] = Counter()
    for view in views:
        if view.problems and not allow_problems:
            v.bad_states += view.problems
        seqs = [e.seq for e in view.events]
        v.recovered += len(seqs)
        counts = Counter(seqs)
        v.duplicated += [f"{view.name}: seq {s} x{c}" for s, c in sorted(counts.items()) if c > 1]
        hot = [e.seq for e in view.hot]
        if hot != sorted(hot):
            v.bad_states.append(f"{view.name}: hot window out of seq order")
        last = 0
        for entry in view.entries:
            if entry.first_seq <= last or entry.last_seq < entry.first_seq:
                v.bad_states.append(f"{view.name}: chunk {entry.chunk_id} overlaps or is out of order")
            last = max(last, entry.last_seq)
        if gap_free and seqs:
            expect = set(range(1, max(seqs) + 1))
            missing = sorted(expect - set(seqs))
            if missing:
                v.bad_states.append(f"{view.name}: seq gaps {missing[:10]} (of {len(missing)})")
        for e in view.events:
            t = tag_of(e)
            tag_counts[t] += 1
            found.setdefault(t, (view.name, e.seq))
            if allowed_set is not None and t not in allowed_set:
                v.phantom.append(f"{view.name}: seq {e.seq} tag {t!r}")
    v.duplicated += [f"tag {t} x{c}" for t, c in sorted(tag_counts.items()) if c > 1 and t]
    for t, seq in sorted(acked.items()):
        where = found.get(t)
        if where is None:
            v.lost.append(f"{t} (seq {seq})")
        elif seq and where[1] != seq:
            v.bad_states.append(f"acked {t} had seq {seq}, stored as seq {where[1]} in {where[0]}")
    return v


def check(
    root: Path,
    acked: Mapping[str, int],
    allowed: Iterable[str] | None = None,
    *,
    gap_free: bool = True,
    allow_problems: bool = False,
) -> Verdict:
    """:func:`check_views` over everything ``root`` holds (archived sessions and the active one)."""
    return check_views(read_root(root), acked, allowed, gap_free=gap_free, allow_problems=allow_problems)


# --------------------------------------------------------------------------
# child output
# --------------------------------------------------------------------------


@dataclass
class ChildLog:
    """What a child printed: intents (``I tag``), acks (``A seq tag``), and other lines."""

    intents: set[str] = field(default_factory=set)
    acked: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    @property
    def max_seq(self) -> int:
        return max(self.acked.values(), default=0)


def parse_child_output(text: str) -> ChildLog:
    log = ChildLog()
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "I" and len(parts) == 2:
            log.intents.add(parts[1])
        elif parts[0] == "A" and len(parts) == 3:
            log.acked[parts[2]] = int(parts[1])
        else:
            log.lines.append(line)
    return log


def read_child_output(path: Path) -> ChildLog:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        text = ""
    # A line cut by SIGKILL mid-print is not an acknowledgement.
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return parse_child_output(text)


# --------------------------------------------------------------------------
# child processes: a fork server, so each child costs a fork, not an interpreter start
# --------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    extra = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + extra if extra else "")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


class Child:
    """A running child: its pid, output files, and (once known) its exit status."""

    def __init__(self, server: ForkServer | None, pid: int, out: Path, err: Path,
                 proc: subprocess.Popen[bytes] | None = None) -> None:
        self.server = server
        self.pid = pid
        self.out = out
        self.err = err
        self.proc = proc

    def returncode(self) -> int | None:
        if self.proc is not None:
            return self.proc.poll()
        assert self.server is not None
        return self.server.status(self.pid)

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while True:
            rc = self.returncode()
            if rc is not None:
                return rc
            if time.monotonic() > deadline:
                raise TimeoutError(f"child {self.pid} did not exit within {timeout}s: {self.stderr()[-2000:]}")
            time.sleep(0.005)

    def kill(self) -> int:
        """SIGKILL the child (a no-op if it already exited) and reap it."""
        if self.returncode() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self.wait(30)

    def output(self) -> ChildLog:
        return read_child_output(self.out)

    def stderr(self) -> str:
        try:
            return self.err.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_line(self, predicate: Any, timeout: float) -> None:
        """Wait until the output satisfies ``predicate(ChildLog)``; raises if the child dies first."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self.output()):
                return
            rc = self.returncode()
            if rc is not None:
                if predicate(self.output()):
                    return
                raise RuntimeError(f"child exited with {rc} before the expected output: {self.stderr()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"child output not seen within {timeout}s: {self.stderr()[-2000:]}")
            time.sleep(0.005)


class ForkServer:
    """``<script> serve`` (``child.py`` by default): a process that imported aiden once and forks one child
    per request.

    The server is single-threaded (no locks held across ``fork``). Its children
    are real processes: they exit with ``os._exit`` at a crash point or are
    SIGKILLed by the test, exactly like a child started with ``sys.executable``.
    """

    def __init__(self, script: Path = CHILD_SCRIPT) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=child_env(),
            cwd=str(REPO_ROOT),
        )
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._pids: list[int] = []
        self._exits: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, name="aiden-forkserver-reader", daemon=True)
        self._reader.start()
        # Wait for the server to be ready.
        with self._cond:
            if not self._cond.wait_for(lambda: self._ready or self.proc.poll() is not None, timeout=60):
                raise RuntimeError("fork server did not start")
        if self.proc.poll() is not None:
            raise RuntimeError("fork server exited at start")

    _ready = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().strip()
            with self._cond:
                if line == "READY":
                    self._ready = True
                elif line.startswith("PID "):
                    self._pids.append(int(line.split()[1]))
                elif line.startswith("EXIT "):
                    _, pid, code = line.split()
                    self._exits[int(pid)] = int(code)
                self._cond.notify_all()
        with self._cond:
            self._ready = True
            self._cond.notify_all()

    def spawn(self, argv: list[str], out: Path, err: Path) -> Child:
        assert self.proc.stdin is not None
        with self._cond:
            before = len(self._pids)
            self.proc.stdin.write(json.dumps({"argv": argv, "out": str(out), "err": str(err)}).encode() + b"\n")
            self.proc.stdin.flush()
            if not self._cond.wait_for(lambda: len(self._pids) > before or self.proc.poll() is not None, timeout=30):
                raise RuntimeError("fork server did not answer")
            if len(self._pids) <= before:
                raise RuntimeError("fork server died")
            pid = self._pids[before]
        return Child(self, pid, out, err)

    def status(self, pid: int) -> int | None:
        with self._cond:
            return self._exits.get(pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._reader.join(timeout=5)


@contextmanager
def serving(script: Path = CHILD_SCRIPT) -> Iterator[ForkServer | None]:
    """A fork server of ``script`` (``script serve``), or None with ``AIDEN_RELIABILITY_NOFORK=1``."""
    if os.environ.get("AIDEN_RELIABILITY_NOFORK", "") not in ("", "0"):
        yield None
        return
    server = ForkServer(script)
    try:
        yield server
    finally:
        server.close()


def spawn_child(
    server: ForkServer | None, argv: list[str], workdir: Path, name: str, *, script: Path = CHILD_SCRIPT
) -> Child:
    """Start ``script <argv>`` through its fork server, or as a plain subprocess without one."""
    out = workdir / f"{name}.out"
    err = workdir / f"{name}.err"
    if server is not None and server.alive():
        return server.spawn(argv, out, err)
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen(
            [sys.executable, str(script), *argv], stdout=fo, stderr=fe, env=child_env(), cwd=str(REPO_ROOT)
        )
    return Child(None, proc.pid, out, err, proc=proc)


def serve_forever(run_child: Any) -> None:
    """The fork server loop (runs in ``child.py serve``): fork per request line, report exits."""
    stdin = sys.stdin.buffer
    out = sys.stdout
    out.write("READY\n")
    out.flush()
    buf = b""
    running: set[int] = set()
    eof = False
    while not eof or running:
        timeout = 0.002 if running else None
        if eof:
            time.sleep(0.002)
            ready: list[Any] = []
        else:
            ready, _, _ = select.select([stdin], [], [], timeout)
        if ready:
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                eof = True
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:  # the child
                    code = 1
                    try:
                        fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                        os.dup2(fd, 1)
                        os.close(fd)
                        fd = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                        os.dup2(fd, 2)
                        os.close(fd)
                        devnull = os.open(os.devnull, os.O_RDONLY)
                        os.dup2(devnull, 0)
                        os.close(devnull)
                        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
                        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
                        code = run_child(req["argv"])
                    except SystemExit as exc:
                        code = exc.code if isinstance(exc.code, int) else 1
                    except BaseException:
                        import traceback

                        traceback.print_exc()
                        code = 1
                    finally:
                        try:
                            sys.stdout.flush()
                            sys.stderr.flush()
                        finally:
                            os._exit(code)
                running.add(pid)
                out.write(f"PID {pid}\n")
                out.flush()
        for pid in list(running):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                running.discard(pid)
                continue
            if done:
                running.discard(pid)
                code = os.waitstatus_to_exitcode(status)
                out.write(f"EXIT {pid} {code}\n")
                out.flush()


# --------------------------------------------------------------------------
# small utilities
# --------------------------------------------------------------------------


def hot_lines(root: Path) -> list[bytes]:
    data = read_bytes(Layout(root).events)
    return data.splitlines(keepends=True)


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


# --------------------------------------------------------------------------
# an in-process workload: appender tasks while compaction runs repeatedly
# --------------------------------------------------------------------------


@dataclass
class Workload:
    acked: dict[str, int] = field(default_factory=dict)
    attempted: set[str] = field(default_factory=set)
    compactions: int = 0
    passes: int = 0


async def inprocess_workload(
    root: Path,
    *,
    config: Any,
    store_factory: Any = None,
    storage: Any = None,
    tasks: int = 4,
    per_task: int = 30,
    passes: int = 4,
    delay: float = 0.02,
    seed: int = 0,
) -> Workload:
    """``tasks`` appender tasks (tags ``t<k>:<i>``) while ``passes`` manual compactions run with a slow summarizer."""
    import anyio

    import aiden
    from aiden.storage.session import FileSessionStore
    from aiden.testing import SlowSummarizer

    rng = random.Random(f"workload/{seed}")
    wl = Workload()
    kwargs: dict[str, Any] = {"store_factory": store_factory or FileSessionStore}
    if storage is not None:
        kwargs["storage"] = storage
    async with aiden.open_memory(root, config=config, summarizer=SlowSummarizer(delay), **kwargs) as memory:
        # A first turn so the root input is pinned ahead of every chunk.
        for i in range(6):
            tag = f"s:{i}"
            wl.attempted.add(tag)
            wl.acked[tag] = (await memory.append(tagged_event(tag, i, rng))).seq

        async def appender(k: int) -> None:
            for i in range(per_task):
                tag = f"t{k}:{i}"
                wl.attempted.add(tag)
                ev = await memory.append(tagged_event(tag, i, rng))
                wl.acked[tag] = ev.seq
                await anyio.sleep(rng.random() * delay / 2)

        async with anyio.create_task_group() as tg:
            for k in range(tasks):
                tg.start_soon(appender, k)
            for _ in range(passes):
                outcome = await memory.maintain(manual=True)
                wl.passes += 1
                wl.compactions += int(outcome.compacted)
    return wl
