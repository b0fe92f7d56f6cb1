"""Child processes of the reliability suite (run with ``sys.executable``, or forked by ``serve``).

Usage::

    child.py serve                                  fork server (see harness.ForkServer)
    child.py appender ROOT NAME SEED [COUNT] [COMPACT_EVERY]
    child.py crasher ROOT SCENARIO POINT HIT SEED
    child.py builder ROOT SCENARIO SEED             a crasher's starting state, built once and copied
    child.py locker ROOT LOCKFILE
    child.py fsize ROOT
    child.py stormer ROOT SLOT NAME RETRY_FILE GATE_FILE [finish]
    child.py ltworker ROOT NAME COUNT

Protocol on stdout, one line each, flushed at once:
``I <tag>`` before an append is requested (the event is in flight),
``A <seq> <tag>`` as soon as ``append`` returned (acknowledged),
``CRASH <point> <n>`` just before ``os._exit(77)`` at a crash point,
``MISS <point> <hits>`` when the scenario ended without reaching the point (exit 3).
"""

from __future__ import annotations

import importlib
import json
import os
import random
import resource
import signal
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio
import anyio.to_thread

import aiden
from aiden import Config, SessionEvent
from aiden.storage.chunks import SEGMENT_SIZE
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.testing import ScriptedSummarizer, SlowSummarizer
from tests.reliability.harness import serve_forever, tag_of, tagged_event

CRASH_EXIT = 77
MISS_EXIT = 3
BUILDER_SEALED_EXIT = 4

BASE_CONFIG = dict(
    durability="fsync",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
    lock_timeout_s=60.0,
    summarizer_timeout_s=30.0,
)


def config_for(scenario: str = "") -> Config:
    """The configuration children and the parent both use for ``scenario``."""
    values = dict(BASE_CONFIG)
    if scenario == "segment":
        values["summary_max_chunks"] = 1  # seals a segment once 35 chunks exist
    return Config(**values)  # type: ignore[arg-type]


def emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class Tagger:
    """Appends tagged events and prints the in-flight / acknowledged protocol lines."""

    def __init__(self, prefix: str, rng: random.Random) -> None:
        self.prefix = prefix
        self.rng = rng
        self.n = 0

    async def append(self, memory: aiden.Memory, k: int = 1) -> list[SessionEvent]:
        events = []
        for _ in range(k):
            tag = f"{self.prefix}:{self.n}"
            events.append(tagged_event(tag, self.n, self.rng))
            self.n += 1
        emit("".join(f"I {tag_of(e)}\n" for e in events))
        stored = await memory.append_many(events)
        emit("".join(f"A {e.seq} {tag_of(e)}\n" for e in stored))
        return stored


class CrashStorage(Storage):
    """Exits the process hard at the ``hit``-th pass through checkpoint ``point``."""

    def __init__(self, point: str, hit: int) -> None:
        super().__init__()
        self.point = point
        self.hit = hit
        self.count = 0

    def checkpoint(self, name: str) -> None:
        if name == self.point:
            self.count += 1
            if self.count >= self.hit:
                emit(f"CRASH {name} {self.count}\n")
                os._exit(CRASH_EXIT)


# --------------------------------------------------------------------------
# roles
# --------------------------------------------------------------------------


async def appender(root: str, name: str, seed: int, count: int, compact_every: int) -> None:
    rng = random.Random(f"appender/{name}/{seed}")
    tagger = Tagger(name, rng)
    async with aiden.open_memory(root, config=config_for(), summarizer=ScriptedSummarizer()) as memory:
        i = 0
        while count <= 0 or i < count:
            await tagger.append(memory, rng.randint(1, 3))
            i += 1
            # Paced (~300 events/s): enough to interleave with every step, bounded work per pass.
            await anyio.sleep(rng.uniform(0.001, 0.008))
            if compact_every and i % compact_every == 0:
                outcome = await memory.maintain(manual=True)
                emit(f"M {int(outcome.compacted)} {outcome.reason}\n")
    emit("DONE\n")


def inject_torn_fragment(root: str, rng: random.Random) -> None:
    """Append a never-acknowledged partial line, holding the session lock like a writer would."""
    layout = Layout(root)
    lock = SessionLock(Storage(), layout.lock_file)
    try:
        lock.acquire(30)
        fd = os.open(layout.events, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b'{"type":"user_input","content":"torn-' + str(rng.random()).encode())
        finally:
            os.close(fd)
    finally:
        lock.close()


def damage_for_recovery(root: str) -> None:
    """Leave work for recovery: a repeated last hot line, a garbage index.yaml, a tampered summary.md."""
    layout = Layout(root)
    clock = SessionLock(Storage(), layout.memory / "compaction.lock")
    elock = SessionLock(Storage(), layout.lock_file)
    try:
        clock.acquire(30)
        elock.acquire(30)
        data = layout.events.read_bytes()
        lines = data.splitlines(keepends=True)
        if lines and lines[-1].endswith(b"\n"):
            # The very same line twice in a row (what a replayed write would leave).
            fd = os.open(layout.events, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, lines[-1])
            finally:
                os.close(fd)
        layout.index.write_bytes(b"chunks: [unclosed\n  - {garbage\n")
        layout.summary.write_bytes(b"tampered summary\n")
    finally:
        elock.close()
        clock.close()


async def crasher(root: str, scenario: str, point: str, hit: int, seed: int) -> int:
    rng = random.Random(f"crasher/{scenario}/{point}/{hit}/{seed}")
    config = config_for(scenario)
    storage = CrashStorage(point, hit)
    tagger = Tagger("c", rng)

    if scenario == "append":
        async with aiden.open_memory(
            root, config=config, storage=storage, summarizer=ScriptedSummarizer()
        ) as m:

            async def worker() -> None:
                for _ in range(400):
                    await tagger.append(m, rng.randint(1, 3))

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(worker)

    elif scenario == "repair":
        async with aiden.open_memory(
            root, config=config, storage=storage, summarizer=ScriptedSummarizer()
        ) as m:
            await tagger.append(m, 2)
            for _ in range(400):
                await anyio.to_thread.run_sync(inject_torn_fragment, root, rng)
                await tagger.append(m, 1)

    elif scenario in ("compaction", "segment"):
        delay = rng.choice([0.0, 0.002, 0.01])
        passes = 45 if scenario == "segment" else 12
        async with aiden.open_memory(
            root, config=config, storage=storage, summarizer=SlowSummarizer(delay)
        ) as m:
            await tagger.append(m, 8)

            async def background() -> None:
                while True:
                    await tagger.append(m, rng.randint(1, 2))
                    await anyio.sleep(rng.random() * 0.004)

            async with anyio.create_task_group() as tg:
                tg.start_soon(background)
                for _ in range(passes):
                    await tagger.append(m, 4)
                    await m.maintain(manual=True)
                tg.cancel_scope.cancel()

    elif scenario == "recovery":
        async with aiden.open_memory(root, config=config, summarizer=ScriptedSummarizer()) as m:
            for _ in range(5):
                await tagger.append(m, 4)
            await m.maintain(manual=True)
            await tagger.append(m, 8)
            await m.maintain(manual=True)
            await tagger.append(m, 3)
        await anyio.to_thread.run_sync(damage_for_recovery, root)
        async with aiden.open_memory(
            root, config=config, storage=storage, summarizer=ScriptedSummarizer()
        ) as m:
            await tagger.append(m, 1)

    elif scenario == "rotate":
        async with aiden.open_memory(root, config=config, summarizer=ScriptedSummarizer()) as m:
            for _ in range(5):
                await tagger.append(m, 4)
            await m.maintain(manual=True)
            await tagger.append(m, 3)
        async with aiden.open_memory(
            root, config=config, storage=storage, summarizer=ScriptedSummarizer()
        ) as m:
            await tagger.append(m, 2)
            await m.rotate("closed-1")
            await tagger.append(m, 2)

    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    emit(f"MISS {point} {storage.count}\n")
    return MISS_EXIT


class NoSealStorage(Storage):
    """Exits the process (``BUILDER_SEALED_EXIT``) if a segment is about to be sealed."""

    def checkpoint(self, name: str) -> None:
        if name.startswith("segment."):
            emit(f"SEALED {name}\n")
            os._exit(BUILDER_SEALED_EXIT)


def chunks_before_seal(config: Config) -> int:
    """The most live chunks a session holds without sealing a segment (the next chunk seals one)."""
    return SEGMENT_SIZE + config.summary_max_chunks + 1


async def builder(root: str, scenario: str, seed: int) -> None:
    """Build the expensive part of a crasher scenario's starting state (tags ``b:<n>``).

    ``segment``: compact one chunk per pass, alone, until one more chunk seals a segment; the
    crasher's ``segment`` scenario then reaches the seal on its first compacting pass, with its
    background appends and the concurrent appender, instead of building 35 chunks under them.
    """
    if scenario != "segment":
        raise SystemExit(f"no starting state to build for {scenario!r}")
    rng = random.Random(f"builder/{scenario}/{seed}")
    config = config_for(scenario)
    tagger = Tagger("b", rng)
    target = chunks_before_seal(config)
    chunks = 0
    async with aiden.open_memory(
        root, config=config, storage=NoSealStorage(), summarizer=SlowSummarizer(0.0)
    ) as m:
        await tagger.append(m, 8)
        for _ in range(4 * target):
            if chunks == target:
                break
            await tagger.append(m, 4)
            outcome = await m.maintain(manual=True)
            chunks += int(outcome.compacted)
    if chunks != target:
        raise SystemExit(f"builder compacted {chunks} chunks, not {target}")
    emit(f"BUILT {chunks}\n")


def locker(root: str, lockfile: str) -> int:
    layout = Layout(root)
    lock = SessionLock(Storage(), layout.memory / lockfile)
    lock.acquire(60)
    emit("LOCKED\n")
    while True:
        time.sleep(1)


async def fsize(root: str) -> None:
    """A real short write: RLIMIT_FSIZE lets a big append write only part of its bytes (EFBIG)."""
    config = Config(durability="fsync", count_compress_after_events=10**6, max_event_bytes=2_000_000)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    layout = Layout(root)
    result: dict[str, object] = {}
    async with aiden.open_memory(root, config=config, summarizer=ScriptedSummarizer()) as m:
        rng = random.Random(7)
        tagger = Tagger("f", rng)
        await tagger.append(m, 3)
        size_before = layout.events.stat().st_size
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        limit = size_before + 5000
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        big = SessionEvent(type="tool_result", content="big:0 " + "x" * 200_000)
        emit("I big:0\n")
        try:
            stored = await m.append(big)
        except aiden.AidenError as exc:
            result["error"] = type(exc).__name__
            result["errno"] = getattr(exc, "errno", None)
            result["message"] = str(exc)[:300]
        else:
            emit(f"A {stored.seq} big:0\n")
            result["error"] = None
        result["size_before"] = size_before
        result["size_after_failure"] = layout.events.stat().st_size
        result["limit"] = limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        after = await tagger.append(m, 1)
        result["next_seq"] = after[0].seq
        result["size_final"] = layout.events.stat().st_size
    emit("RESULT " + json.dumps(result) + "\n")


# --------------------------------------------------------------------------
# stormer: a kill-storm worker (tests/reliability/test_kill_storm.py)
# --------------------------------------------------------------------------

STORM_APPENDERS = 3


def storm_event(tag: str) -> SessionEvent:
    """The event of ``tag`` with ``event_id=tag``: a function of the tag, so a retry is the same event."""
    rng = random.Random(tag)
    body = " ".join(
        rng.choice(("parser", "deploy", "cache", "retry", "schema")) for _ in range(rng.randint(3, 10))
    )
    return SessionEvent(
        type="assistant_output", role="assistant", content=f"{tag} done: {body}", event_id=tag
    )


async def append_until_acked(memory: aiden.Memory, tag: str) -> None:
    """Append ``tag`` and retry the same event id until it is acknowledged (what a client does)."""
    emit(f"I {tag}\n")
    for _ in range(600):
        try:
            stored = await memory.append(storm_event(tag))
        except aiden.AidenError as exc:  # lock timeout while another process compacts or rotates
            emit(f"E {type(exc).__name__}\n")
            await anyio.sleep(0.05)
            continue
        emit(f"A {stored.seq} {tag}\n")
        return
    raise SystemExit(5)


class Quiesce:
    """Appender tasks hold a shared permit; a rotation waits until none is in flight and blocks new ones.

    A rotation must not have one of this process's appends in flight: an append
    committed just before the rename and then SIGKILLed before its ack would be
    retried into the *new* session, where its event id is (by contract) unknown.
    """

    def __init__(self) -> None:
        self.active = 0
        self.exclusive = False
        self.changed = anyio.Event()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def enter(self) -> None:
        while self.exclusive:
            await self.changed.wait()
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        self._notify()

    async def lock(self) -> None:
        while self.exclusive:
            await self.changed.wait()
        self.exclusive = True
        while self.active:
            await self.changed.wait()

    def unlock(self) -> None:
        self.exclusive = False
        self._notify()


async def storm_op(
    memory: aiden.Memory, op: str, slot: str, name: str, n: int, gate: Path, q: Quiesce
) -> None:
    """One maintenance / lifecycle operation, bracketed by ``O+ op`` / ``O- op`` lines."""
    emit(f"O+ {op}\n")
    if op == "maintain":
        outcome = await memory.maintain(manual=True)
        emit(f"M {int(outcome.compacted)}\n")
    elif op == "checkpoint":
        await memory.checkpoint()
    elif op == "dream":
        await memory.dream()
    elif op == "save":
        await memory.handle_tool_call(
            "save_memory", {"type": "fact", "title": f"{name} {n}", "content": f"the cache key is schema {n}"}
        )
    elif op == "rotate":
        await q.lock()
        try:
            # Re-read after announcing the attempt: the coordinator closes the gate, then waits
            # for every announced attempt to end, so no rotation commits after that wait.
            if gate.read_text().strip() == slot:  # noqa: ASYNC240
                tag = f"{name}r{n}"
                emit(f"I {tag}\n")
                start = await memory.begin_run(
                    f"{tag} please start over",
                    new_session=True,
                    closed_session_id=f"{name}-{n}",
                    event_id=tag,
                )
                emit(f"A {start.user_event.seq} {tag}\n")
                emit(f"ROT {start.archived_session_id}\n")
        finally:
            q.unlock()
    emit(f"O- {op}\n")


async def stormer(root: str, slot: str, name: str, retry: Path, gate: Path, finish: bool) -> None:
    retries = retry.read_text().split() if retry.exists() else []  # noqa: ASYNC240
    rng = random.Random(name)
    config = config_for()
    n = 0
    first = True
    while True:
        # The embedded summarizer: Dream asks the memory's summarizer, and only real sections make
        # Dream edit and commit (a scripted summarizer's text holds none).
        async with aiden.open_memory(root, config=config) as memory:
            if first:
                for tag in retries:
                    await append_until_acked(memory, tag)
                emit("R\n")
                first = False
                if finish:
                    return
            stop = anyio.Event()
            q = Quiesce()

            async def appender(k: int, stop: anyio.Event, q: Quiesce) -> None:
                nonlocal n
                while not stop.is_set():
                    await q.enter()
                    try:
                        n += 1
                        await append_until_acked(memory, f"{name}a{k}n{n}")
                    finally:
                        q.leave()
                    await anyio.sleep(rng.uniform(0.005, 0.03))

            async with anyio.create_task_group() as tg:
                for k in range(STORM_APPENDERS):
                    tg.start_soon(appender, k, stop, q)
                while True:
                    await anyio.sleep(rng.uniform(0.02, 0.12))
                    op = rng.choice(("maintain", "maintain", "checkpoint", "dream", "save", "close"))
                    if rng.random() < 0.5 and gate.read_text().strip() == slot:  # noqa: ASYNC240
                        op = "rotate"  # this round's rotator: rotate often, so kills hit rotations
                    if op == "close":
                        break
                    n += 1
                    await storm_op(memory, op, slot, name, n, gate, q)
                # Appenders finish the append in flight: a cancelled append would be unacknowledged
                # although stored, and its retry could cross a later rotation.
                stop.set()
            emit("O+ close\n")
        emit("O- close\n")


async def ltworker(root: str, name: str, count: int) -> None:
    """Long-term work on a shared root: compaction (history records), save/forget, Dream.

    Prints ``S <id>`` per saved memory, ``F <id>`` per forgotten one and
    ``D <cursor>`` per Dream run, besides the append protocol.
    """
    rng = random.Random(f"ltworker/{name}")
    tagger = Tagger(name, rng)
    saved: list[str] = []
    # The embedded summarizer, so Dream edits and commits (see stormer).
    async with aiden.open_memory(root, config=config_for()) as memory:
        for i in range(count):
            await tagger.append(memory, 4)
            await memory.maintain(manual=True)
            answer = json.loads(
                await memory.handle_tool_call(
                    "save_memory",
                    {"type": "fact", "title": f"{name} {i}", "content": f"{name} knows fact {i}"},
                )
            )
            saved.append(answer["saved"]["id"])
            emit(f"S {saved[-1]}\n")
            if i % 3 == 2:
                gone = saved.pop(0)
                answer = json.loads(await memory.handle_tool_call("forget_memory", {"id": gone}))
                emit(f"F {gone} {json.dumps(answer, sort_keys=True)}\n")
            outcome = await memory.dream()
            emit(f"D {outcome.cursor}\n")
    emit("DONE\n")


class ForeignFailingStorage(Storage):
    """Raises a non-aiden error while Dream writes MEMORY.md (what dulwich's FileLocked did)."""

    def write_atomic(self, path: str | os.PathLike[str], data: bytes, *, crash_prefix: str = "") -> None:
        if os.fspath(path).endswith("MEMORY.md"):
            raise RuntimeError("foreign failure inside a long-term handler")
        super().write_atomic(path, data, crash_prefix=crash_prefix)


async def foreign(root: str) -> None:
    """``memory.dream()`` when its handler meets a foreign error: prints ``RAISED <kind>``."""
    async with aiden.open_memory(
        root, config=config_for(), storage=ForeignFailingStorage()
    ) as memory:
        for i in range(30):
            await memory.append(
                SessionEvent(type="user_input", role="user", content=f"x:{i} fix the parser {i}")
            )
        await memory.maintain(manual=True)
        try:
            await memory.dream()
        except aiden.AidenError:
            emit("RAISED AidenError\n")
        else:
            emit("RAISED nothing\n")


# --------------------------------------------------------------------------


def run_child(argv: list[str]) -> int:
    role, args = argv[0], argv[1:]
    if role == "appender":
        count = int(args[3]) if len(args) > 3 else 0
        compact_every = int(args[4]) if len(args) > 4 else 0
        anyio.run(appender, args[0], args[1], int(args[2]), count, compact_every)
        return 0
    if role == "crasher":
        return int(anyio.run(crasher, args[0], args[1], args[2], int(args[3]), int(args[4])))
    if role == "builder":
        anyio.run(builder, args[0], args[1], int(args[2]))
        return 0
    if role == "locker":
        return locker(args[0], args[1])
    if role == "fsize":
        anyio.run(fsize, args[0])
        return 0
    if role == "foreign":
        anyio.run(foreign, args[0])
        return 0
    if role == "ltworker":
        anyio.run(ltworker, args[0], args[1], int(args[2]))
        return 0
    if role == "stormer":
        anyio.run(stormer, args[0], args[1], args[2], Path(args[3]), Path(args[4]), args[5:] == ["finish"])
        return 0
    raise SystemExit(f"unknown role {role!r}")


def preload() -> None:
    """Import what opening a memory imports lazily, once in the fork server rather than in every child.

    ``import aiden`` stays cheap by loading the memory, long-term, recall and experience
    modules (dulwich, sqlite3, yaml, asyncio) on first use: ~0.4 s that each forked child
    paid again on its first ``open_memory``, which also loads ``importlib.metadata`` to list
    the installed extensions. Imports only (no thread, no open file, nothing called), so the
    server still forks a single-threaded process; the children run exactly the same code.
    Also the experience children's fork server's (``tests/experience/experience_child.py``).
    """
    for name in ("open_memory", "open_host", "FileSessionStore"):
        getattr(aiden, name)
    importlib.import_module("anyio._backends._asyncio")  # what anyio.run loads for its backend
    importlib.import_module("importlib.metadata")


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if sys.argv[1] == "serve":
        preload()
        serve_forever(run_child)
        return
    code = run_child(sys.argv[1:])
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
