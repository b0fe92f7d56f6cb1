"""Durable appends under concurrency: aiden's full actor stack vs this disk's raw limits.

Systems, run side by side in every repeat (in a rotated order) at each level
of concurrency (1, 8, 64, 256 appenders):

- ``per_event_fsync``: a bare synchronous loop of ``os.write`` + ``fsync`` per event
  (the disk's limit when nothing is batched);
- ``group_commit``: a bare asyncio loop where N appenders enqueue their line and one
  writer task takes everything queued and writes it with one ``write`` + one
  ``fsync`` in one worker-thread hop, then wakes the batch (the best an asyncio
  group commit can do, with none of aiden's validation, seqs, locks or actors);
- ``aiden_fsync``: ``open_memory(...).append`` with ``durability: fsync`` and the same
  N appenders (validation, msgspec-encoded actor hops, session lock, seqs, group commit);
- ``aiden_none``: the same with ``durability: none`` (acknowledged after write(2)).

All write the same bytes per event (aiden's own encoding of the event).
Reported: throughput (median of repeats, min-max), paired ratios (aiden vs each
baseline in the same repeat), append latency p50/p99/p99.9 over the samples of
all repeats, mean events per fsync (batch size) and CPU time per event.

    python benchmarks/bench_append.py [--quick]

``--store postgres`` runs instead the file store (``aiden_fsync``) and the
PostgreSQL store (``aiden_pg``: ``open_memory`` with a PostgreSQL
``store_factory``, a fresh session id per run) alternately at 1, 8, 64
appenders, on one server for the whole run (a throwaway cluster restarted
with ``fsync=on``, or ``--pg-dsn``; see ``bench_pg_scaling.py``): throughput,
the paired ratio PostgreSQL / file store per repeat, p50/p99, events per
commit (fsync of the file store, append transaction of PostgreSQL) and CPU
per event of the client and of the server. Each level runs with all its
appenders on one session and, with ``--sessions`` (default ``1,64``), spread
over that many sessions of one process (64 sessions with one appender each:
the writers commit them together in one PostgreSQL transaction; the file
store fsyncs each session's log). Written to ``results/append_postgres.json``.

    python benchmarks/bench_append.py --store postgres [--quick] [--sessions 1,64] [--pg-dsn DSN] [--pg-fsync off]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, paired, rng, rotate, summarize, table, target, write_result
from bench_pg_scaling import BenchServer, bench_server

import aiden
from aiden import Config, Layout, SessionEvent
from aiden.events import encode_event
from aiden.storage.fs import Storage
from aiden.storage.protocol import AppendGroup, PreparedEvent, SessionStore
from aiden.testing.pgcluster import TEST_DSN_ENV

CONTENT = "x" * 120
EVENT = SessionEvent(type="user_input", role="user", content=CONTENT)
# The exact line aiden writes for EVENT (timestamp and seq included), so the
# baselines move the same bytes.
LINE = encode_event(
    SessionEvent(type="user_input", role="user", content=CONTENT, seq=123456, timestamp=time.time())
)

LEVELS = (1, 8, 64, 256)
SYSTEMS = ("per_event_fsync", "group_commit", "aiden_fsync", "aiden_none")


class CountingStorage(Storage):
    """The real storage, counting fsyncs (to report the mean group-commit batch size)."""

    def __init__(self) -> None:
        super().__init__()
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)


class Run:
    """One measured run: throughput, latency samples, fsyncs, CPU seconds."""

    def __init__(
        self, events: int, seconds: float, lat: list[float], fsyncs: int, cpu: float, server_cpu: float = 0.0
    ) -> None:
        self.events = events
        self.seconds = seconds
        self.eps = events / seconds
        self.lat = lat
        self.fsyncs = fsyncs
        self.cpu = cpu
        self.server_cpu = server_cpu


def per_event_fsync(directory: str, seconds: float) -> Run:
    fd = os.open(os.path.join(directory, "raw.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.fsync(fd)
    lat: list[float] = []
    c0 = time.process_time()
    t0 = time.perf_counter()
    stop = t0 + seconds
    while True:  # the first append always: a run descheduled past its whole window still measures one
        s = time.perf_counter()
        os.write(fd, LINE)
        os.fsync(fd)
        lat.append(time.perf_counter() - s)
        if time.perf_counter() >= stop:
            break
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    os.close(fd)
    return Run(len(lat), dt, lat, len(lat), cpu)


async def group_commit(directory: str, appenders: int, seconds: float) -> Run:
    fd = os.open(os.path.join(directory, "gc.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.fsync(fd)
    send, recv = anyio.create_memory_object_stream[tuple[bytes, anyio.Event]](4096)
    lat: list[float] = []
    batches = 0

    def commit(data: bytes) -> None:
        os.write(fd, data)
        os.fsync(fd)

    async def writer() -> None:
        nonlocal batches
        async with recv:
            async for first in recv:
                batch = [first]
                while True:
                    try:
                        batch.append(recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await anyio.to_thread.run_sync(commit, b"".join(b for b, _ in batch))
                batches += 1
                for _, ev in batch:
                    ev.set()

    async def appender(stop: float) -> None:
        while True:  # at least one append each (see per_event_fsync)
            t = time.perf_counter()
            ev = anyio.Event()
            await send.send((LINE, ev))
            await ev.wait()
            lat.append(time.perf_counter() - t)
            if time.perf_counter() >= stop:
                break

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        c0 = time.process_time()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as inner:
            for _ in range(appenders):
                inner.start_soon(appender, t0 + seconds)
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        await send.aclose()
    os.close(fd)
    return Run(len(lat), dt, lat, batches, cpu)


async def aiden_appends(
    directory: str,
    appenders: int,
    seconds: float,
    durability: str,
    store: Callable[[Layout, Storage, Config], SessionStore] | None = None,
    server_cpu: Callable[[], float] | None = None,
    warm: bool = False,
    sessions: int = 1,
) -> Run:
    """``appenders`` tasks appending through ``open_memory`` for ``seconds`` (the file store unless ``store``).

    ``store`` is a store factory counting its commits in ``commits`` (the PostgreSQL
    variant: one transaction per group commit); ``server_cpu`` reads the server's
    CPU seconds, so its share of the cost is reported too. ``warm``: one untimed append first.
    ``sessions``: the appenders share that many memories (each its own root and session),
    appender ``i`` appending to memory ``i % sessions``.
    """
    lat: list[float] = []
    config = Config(
        durability=durability,  # type: ignore[arg-type]
        count_compress_after_events=10**9,
        session_summary_on_close=False,
    )
    storage = CountingStorage()
    extra: dict[str, Any] = {} if store is None else {"store_factory": store}
    async with AsyncExitStack() as stack:
        memories = [
            await stack.enter_async_context(
                aiden.open_memory(
                    os.path.join(directory, f"s{i}"),
                    config=config,
                    context_window=10**9,
                    storage=storage,
                    **extra,
                )
            )
            for i in range(sessions)
        ]
        if warm:  # outside the window: a PostgreSQL pool connected, its session rows created
            for memory in memories:
                await memory.append(EVENT)

        async def appender(memory: aiden.Memory, stop: float) -> None:
            while True:  # at least one append each (see per_event_fsync)
                t = time.perf_counter()
                await memory.append(EVENT)
                lat.append(time.perf_counter() - t)
                if time.perf_counter() >= stop:
                    break

        f0 = storage.fsyncs + getattr(store, "commits", 0)
        s0 = server_cpu() if server_cpu else 0.0
        c0 = time.process_time()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(appenders):
                tg.start_soon(appender, memories[i % sessions], t0 + seconds)
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        server = (server_cpu() - s0) if server_cpu else 0.0
        fsyncs = storage.fsyncs + getattr(store, "commits", 0) - f0
    return Run(len(lat), dt, lat, fsyncs, cpu, server)


def measure(system: str, level: int, seconds: float) -> Run:
    """One time-boxed run: every appender keeps appending until ``seconds`` have passed."""
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        if system == "per_event_fsync":
            return per_event_fsync(d, seconds)
        if system == "group_commit":
            return anyio.run(group_commit, d, level, seconds)
        if system == "aiden_fsync":
            return anyio.run(aiden_appends, d, level, seconds, "fsync")
        return anyio.run(aiden_appends, d, level, seconds, "none")


def run(
    quick: bool,
    *,
    levels: tuple[int, ...] = LEVELS,
    repeats: int | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """Run every system at every level ``repeats`` times, each run time-boxed to ``seconds``."""
    repeats = repeats or (2 if quick else 5)
    seconds = seconds or (0.3 if quick else 1.0)
    results: dict[str, Any] = {
        "workload": "concurrent durable appends through the public API",
        "event_bytes": len(LINE),
        "repeats": repeats,
        "seconds_per_run": seconds,
        "levels": {},
    }
    rows = []
    targets = []
    for level in levels:
        runs: dict[str, list[Run]] = {s: [] for s in SYSTEMS}
        for r in range(repeats):
            for system in rotate(SYSTEMS, r + level):
                runs[system].append(measure(system, level, seconds))
        eps = {s: [x.eps for x in runs[s]] for s in SYSTEMS}
        entry: dict[str, Any] = {"appenders": level}
        for s in SYSTEMS:
            lat = [v for x in runs[s] for v in x.lat]
            n_events = sum(x.events for x in runs[s])
            entry[s] = {
                "eps": summarize(eps[s]),
                "events": n_events,
                "latency_ms": latency_ms(lat),
                "events_per_fsync": n_events / max(1, sum(x.fsyncs for x in runs[s])),
                "cpu_us_per_event": 1e6 * sum(x.cpu for x in runs[s]) / n_events,
            }
        entry["ratio_aiden_vs_group_commit"] = paired(eps["aiden_fsync"], eps["group_commit"])
        entry["ratio_aiden_vs_per_event_fsync"] = paired(eps["aiden_fsync"], eps["per_event_fsync"])
        entry["ratio_group_commit_vs_per_event_fsync"] = paired(eps["group_commit"], eps["per_event_fsync"])
        entry["ratio_aiden_none_vs_aiden_fsync"] = paired(eps["aiden_none"], eps["aiden_fsync"])
        entry["cpu_ratio_aiden_vs_group_commit"] = (
            entry["aiden_fsync"]["cpu_us_per_event"] / entry["group_commit"]["cpu_us_per_event"]
        )
        results["levels"][str(level)] = entry
        a = entry["aiden_fsync"]
        g = entry["group_commit"]
        rows.append(
            [
                level,
                rng(a["eps"]),
                rng(g["eps"]),
                rng(entry["per_event_fsync"]["eps"]),
                rng(entry["ratio_aiden_vs_group_commit"], ".2f", suffix="x"),
                rng(entry["ratio_aiden_vs_per_event_fsync"], ".1f", suffix="x"),
                f"{a['latency_ms']['p50']:.2f} / {a['latency_ms']['p99']:.2f} / {a['latency_ms']['p999']:.2f}",
                f"{g['latency_ms']['p50']:.2f} / {g['latency_ms']['p99']:.2f}",
                f"{a['events_per_fsync']:.1f} / {g['events_per_fsync']:.1f}",
                f"{a['cpu_us_per_event']:.1f} / {g['cpu_us_per_event']:.1f} = {entry['cpu_ratio_aiden_vs_group_commit']:.2f}x",
                rng(entry["aiden_none"]["eps"]),
                f"{entry['aiden_none']['latency_ms']['p50']:.2f} / {entry['aiden_none']['latency_ms']['p99']:.2f}",
            ]
        )
        if level == 64:
            rg = entry["ratio_aiden_vs_group_commit"]
            rf = entry["ratio_aiden_vs_per_event_fsync"]
            targets.append(
                target(
                    "append: aiden / bare group commit at 64 appenders",
                    ">= 0.6x",
                    rg["median"],
                    rg["median"] >= 0.6,
                    rng(rg, ".2f", suffix="x"),
                )
            )
            rc = entry["cpu_ratio_aiden_vs_group_commit"]
            targets.append(
                target(
                    "append: aiden CPU per event / bare group commit's at 64 appenders",
                    "<= 1.2x",
                    rc,
                    rc <= 1.2,
                    f"{rc:.2f}x",
                )
            )
            targets.append(
                target(
                    "append: aiden / per-event fsync at 64 appenders",
                    ">= 10x",
                    rf["median"],
                    rf["median"] >= 10,
                    rng(rf, ".1f", suffix="x"),
                )
            )
    results["targets"] = targets
    results["table"] = table(
        [
            "appenders",
            "aiden fsync ev/s",
            "bare group commit ev/s",
            "per-event fsync ev/s",
            "aiden / group commit",
            "aiden / per-event fsync",
            "aiden p50 / p99 / p99.9 ms",
            "group commit p50 / p99 ms",
            "events per fsync (aiden / gc)",
            "CPU us/event aiden / gc",
            "aiden durability=none ev/s",
            "none p50 / p99 ms",
        ],
        rows,
    )
    return results


# --- --store postgres: the PostgreSQL store next to the file store, same run ------------

PG_LEVELS = (1, 8, 64)
PG_SYSTEMS = ("aiden_fsync", "aiden_pg")


class CountingPgFactory:
    """A ``store_factory`` of PostgreSQL stores on fresh session ids, counting their append transactions."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.commits = 0

    def __call__(self, layout: Layout, storage: Storage, config: Config) -> SessionStore:
        from aiden.storage.postgres import PostgresSessionStore

        factory = self

        class Counting(PostgresSessionStore):
            def append(self, requests: Sequence[Sequence[PreparedEvent]]) -> list[list[int]]:
                factory.commits += 1  # one call is one transaction: one group commit
                return super().append(requests)

            @property
            def append_group(self) -> CountingGroup:
                return CountingGroup(super().append_group, factory)

        return Counting(self.dsn, f"bench-{uuid.uuid4().hex[:12]}", config=config)


class CountingGroup:
    """A store's append group that counts its steps (one transaction for several sessions)."""

    def __init__(self, inner: AppendGroup, factory: CountingPgFactory) -> None:
        self.inner = inner
        self.factory = factory

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountingGroup) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(self.inner)

    def append_sessions(
        self, batches: Sequence[tuple[SessionStore, Sequence[Sequence[PreparedEvent]]]]
    ) -> list[list[list[int]] | Exception]:
        self.factory.commits += 1
        return self.inner.append_sessions(batches)


def measure_pg(system: str, level: int, seconds: float, server: BenchServer, sessions: int = 1) -> Run:
    """One time-boxed run of the file store (``aiden_fsync``) or the PostgreSQL store (``aiden_pg``)."""
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        if system == "aiden_fsync":
            return anyio.run(partial(aiden_appends, d, level, seconds, "fsync", warm=True, sessions=sessions))
        return anyio.run(
            partial(
                aiden_appends,
                d,
                level,
                seconds,
                "fsync",
                CountingPgFactory(server.dsn),
                server.cpu_seconds,
                warm=True,
                sessions=sessions,
            )
        )


def run_postgres(
    quick: bool,
    *,
    levels: tuple[int, ...] = PG_LEVELS,
    repeats: int | None = None,
    seconds: float | None = None,
    dsn: str | None = None,
    pg_fsync: bool = True,
    sessions: tuple[int, ...] = (1,),
) -> dict[str, Any]:
    """The file store (``durability: fsync``) and the PostgreSQL store at each level, alternating in every repeat.

    Each level runs once per entry of ``sessions`` (at most one session per appender): the
    appenders on one session (the writer's group commit), or spread over many (64 sessions
    with one appender each: PostgreSQL commits them together, the file store fsyncs each).
    """
    repeats = repeats or (2 if quick else 5)
    seconds = seconds or (0.5 if quick else 2.0)
    load0 = os.getloadavg()
    layouts = [(level, n) for level in levels for n in sessions if n <= level]
    runs: dict[tuple[int, int], dict[str, list[Run]]] = {lay: {s: [] for s in PG_SYSTEMS} for lay in layouts}
    with bench_server(dsn, fsync=pg_fsync) as server:
        for level, n in layouts:
            for r in range(repeats):
                for system in rotate(PG_SYSTEMS, r):
                    runs[level, n][system].append(measure_pg(system, level, seconds, server, n))
        described = server.describe()
        server_cpu_known = server.cpu_seconds is not None
    results: dict[str, Any] = {
        "workload": "concurrent durable appends through the public API: file store vs PostgreSQL store",
        "server": described,
        "event_bytes": len(LINE),
        "repeats": repeats,
        "seconds_per_run": seconds,
        "loadavg_before_after": [round(load0[0], 2), round(os.getloadavg()[0], 2)],
        "levels": {},
    }
    rows = []
    for level, n in layouts:
        entry: dict[str, Any] = {"appenders": level, "sessions": n}
        for s in PG_SYSTEMS:
            xs = runs[level, n][s]
            n_events = sum(x.events for x in xs)
            entry[s] = {
                "eps": summarize([x.eps for x in xs]),
                "events": n_events,
                "latency_ms": latency_ms([v for x in xs for v in x.lat]),
                # fsyncs of the file store; append transactions of the PostgreSQL store
                "events_per_commit": n_events / max(1, sum(x.fsyncs for x in xs)),
                "cpu_us_per_event": 1e6 * sum(x.cpu for x in xs) / n_events,
                "server_cpu_us_per_event": 1e6 * sum(x.server_cpu for x in xs) / n_events,
            }
        f, p = entry["aiden_fsync"], entry["aiden_pg"]
        entry["ratio_pg_vs_file"] = paired(
            [x.eps for x in runs[level, n]["aiden_pg"]], [x.eps for x in runs[level, n]["aiden_fsync"]]
        )
        entry["ratio_p99_pg_vs_file"] = p["latency_ms"]["p99"] / f["latency_ms"]["p99"]
        results["levels"][str(level) if n == 1 else f"{level}x{n}"] = entry
        server_cost = f" + {p['server_cpu_us_per_event']:.0f}" if server_cpu_known else ""
        rows.append(
            [
                level,
                n,
                rng(f["eps"]),
                rng(p["eps"]),
                rng(entry["ratio_pg_vs_file"], ".2f", suffix="x"),
                f"{f['latency_ms']['p50']:.2f} / {f['latency_ms']['p99']:.2f}",
                f"{p['latency_ms']['p50']:.2f} / {p['latency_ms']['p99']:.2f}",
                f"{entry['ratio_p99_pg_vs_file']:.2f}x",
                f"{f['events_per_commit']:.1f} / {p['events_per_commit']:.1f}",
                f"{f['cpu_us_per_event']:.0f} / {p['cpu_us_per_event']:.0f}{server_cost}",
            ]
        )
    results["table"] = table(
        [
            "appenders",
            "sessions",
            "file store ev/s",
            "PostgreSQL ev/s",
            "PostgreSQL / file",
            "file p50 / p99 ms",
            "PostgreSQL p50 / p99 ms",
            "p99 PostgreSQL / file",
            "events per commit (file fsync / PG transaction)",
            "CPU us/event file / PG client (+ PG server)",
        ],
        rows,
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer events and repeats")
    parser.add_argument(
        "--levels", default=",".join(map(str, LEVELS)), help="comma-separated appender counts"
    )
    parser.add_argument("--name", default=None, help="result file name (default append, append_postgres)")
    parser.add_argument(
        "--store",
        choices=("file", "postgres"),
        default="file",
        help="postgres: the file store and the PostgreSQL store side by side at 1, 8, 64 appenders",
    )
    parser.add_argument(
        "--pg-dsn", help=f"an existing server (default ${TEST_DSN_ENV}, else a throwaway cluster)"
    )
    parser.add_argument(
        "--pg-fsync", choices=("on", "off"), default="on", help="fsync of a cluster started here"
    )
    parser.add_argument(
        "--sessions",
        default="1,64",
        help="--store postgres: comma-separated session counts the appenders are spread over",
    )
    args = parser.parse_args()
    if args.store == "postgres":
        levels = (
            PG_LEVELS
            if args.levels == ",".join(map(str, LEVELS))
            else tuple(map(int, args.levels.split(",")))
        )
        results = run_postgres(
            args.quick,
            levels=levels,
            dsn=args.pg_dsn,
            pg_fsync=args.pg_fsync == "on",
            sessions=tuple(int(x) for x in args.sessions.split(",")),
        )
        print(results["server"])
    else:
        results = run(args.quick, levels=tuple(int(x) for x in args.levels.split(",")))
    name = args.name or ("append_postgres" if args.store == "postgres" else "append")
    path = write_result(name, results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
