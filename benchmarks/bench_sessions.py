"""Many sessions in one process, file store (#36): threads, memory and descriptors per open session.

Each size runs in a fresh interpreter (``--child N``) so RSS is its own:

* open N memories on distinct roots in one event loop, one after the other, each
  in its own task (``open_memory`` as an agent platform serving each session in a
  task would, each kept open), timing each open and the first append (which opens
  the session's log);
* idle for a second, then count: threads of the process, asyncio tasks, open
  descriptors and RSS growth per open session; all of it again after 11 more
  seconds (anyio's idle worker threads exit after 10 s), when sessions idle longer
  than ``--evict-after`` seconds (``evict_after_idle_minutes``) have parked their actors;
* ``--host``: every session on one explicit host (``aiden.open_host``) instead of the host the
  memories open in one event loop share;
* one more append to each (to a parked session: it starts the actors again), timed,
  then close them one after the other, timing each close; descriptors and threads left after.

``--postgres``: the same on the PostgreSQL store (``open_memory(root,
store=DSN, session_id=...)``, a throwaway cluster with the server's default
``max_connections`` unless ``$AIDEN_TEST_PG_DSN`` names one), counting the
server connections of the process (peak, sampled every 20 ms, and idle). The
issue's bar: 1,000 sessions on a server with ``max_connections`` 100 using
<= 10 connections.

Then ``--cycles`` open / append / close cycles of one root after another,
with the process's descriptor and thread counts before and after (a leak
shows as growth). The issue's bars: <= 8 threads in total and <= 50 KB RSS per
idle session at 1, 1,000 and 10,000 sessions; a flat descriptor count over
10,000 cycles. A size the descriptor limit cannot hold (descriptors per
session x N above ``ulimit -n``) is reported as such instead of run.

    python benchmarks/bench_sessions.py [--sizes 1,1000,10000] [--cycles 10000] [--quick] [--postgres]
                                        [--evict-after SECONDS] [--host]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, table, write_result  # noqa: E402


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _sessions(n: int, settle_s: float | None = None) -> dict[str, Any]:
    import anyio

    import aiden
    from aiden import Config, SessionEvent

    evict_s = float(os.environ.get("AIDEN_BENCH_EVICT_S", "2"))
    cfg = Config(durability="none", evict_after_idle_minutes=evict_s / 60)
    opens: list[float] = []
    appends: list[float] = []
    wakes: list[float] = []
    closes: list[float] = []

    async def session(
        path: str, i: int, opened: anyio.Event, close: anyio.Event, closed: anyio.Event
    ) -> None:
        # Each session in its own task, as a server serves each of its sessions: N memories
        # entered one inside the other in one task nest N cancel scopes, and anyio walks that
        # chain at every checkpoint (opens grew from 9 to 20 ms between 500 and 3,000 sessions).
        t = time.perf_counter()
        async with aiden.open_memory(path, config=cfg, host=host) as memory:
            opens.append(time.perf_counter() - t)
            t = time.perf_counter()
            await memory.append(SessionEvent(type="user_input", content=f"hello from session {i}"))
            appends.append(time.perf_counter() - t)
            opened.set()
            await close.wait()
            # After the idle time: an append (to a parked session, it starts the actors again).
            t = time.perf_counter()
            await memory.append(SessionEvent(type="user_input", content=f"back in session {i}"))
            wakes.append(time.perf_counter() - t)
            t = time.perf_counter()
        closes.append(time.perf_counter() - t)
        closed.set()

    # --host: every session on one host (its wake loop is counted once, before the first open).
    shared = aiden.open_host() if os.environ.get("AIDEN_BENCH_HOST") == "1" else None
    host = await shared.__aenter__() if shared is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        # A first session warms the imports and the shared threads: what follows is per session.
        async with aiden.open_memory(f"{tmp}/warm", config=cfg, host=host) as memory:
            await memory.append(SessionEvent(type="user_input", content="warm"))
        rss0, fds0, threads0 = _rss(), _fds(), threading.active_count()
        tasks0 = len(asyncio.all_tasks())
        ends: list[tuple[anyio.Event, anyio.Event]] = []
        async with anyio.create_task_group() as tg:
            for i in range(n):  # one after the other, as sessions arrive
                opened, close, closed = anyio.Event(), anyio.Event(), anyio.Event()
                tg.start_soon(session, f"{tmp}/s{i}", i, opened, close, closed)
                await opened.wait()
                ends.append((close, closed))
            await asyncio.sleep(1.0)
            idle = {
                "threads": threading.active_count(),
                "threads_before": threads0,
                # Less the session's own serving task, which is the bench's, not aiden's.
                "tasks_per_session": (len(asyncio.all_tasks()) - tasks0) / n - 1,
                "fds_per_session": (_fds() - fds0) / n,
                "rss_kb_per_session": (_rss() - rss0) / n / 1024,
            }
            # anyio's worker threads of the opens exit after 10 s idle: what the idle sessions keep.
            await asyncio.sleep(
                float(os.environ.get("AIDEN_BENCH_SETTLE_S", "11")) if settle_s is None else settle_s
            )
            idle["threads_settled"] = threading.active_count()
            # After the idle time, sessions idle longer than evict_after_idle_minutes are parked.
            idle["settled"] = {
                "tasks_per_session": (len(asyncio.all_tasks()) - tasks0) / n - 1,
                "fds_per_session": (_fds() - fds0) / n,
                "rss_kb_per_session": (_rss() - rss0) / n / 1024,
            }
            for close, closed in ends:
                close.set()
                await closed.wait()
        await asyncio.sleep(0.2)
        result = {
            "sessions": n,
            **idle,
            "open_ms": latency_ms(opens),
            "first_append_ms": latency_ms(appends),
            "append_after_idle_ms": latency_ms(wakes),
            "close_ms": latency_ms(closes),
            "evict_after_s": evict_s,
            "shared_host": shared is not None,
            "fds_left": _fds() - fds0,
            "threads_after": threading.active_count(),
        }
    if shared is not None:
        await shared.__aexit__(None, None, None)
    return result


def _server_connections(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


async def _pg_sessions(n: int) -> dict[str, Any]:
    import psycopg

    import aiden
    from aiden import Config, SessionEvent

    dsn = os.environ["AIDEN_BENCH_PG_DSN"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    max_connections = int(row[0]) if row else -1
    peak = 0
    sampling = True

    def sample() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, _server_connections(dsn))
            time.sleep(0.02)

    cfg = Config(durability="none")
    opens: list[float] = []
    appends: list[float] = []
    closes: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = _server_connections(dsn)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        stacks: list[contextlib.AsyncExitStack] = []
        memories = []
        run = os.urandom(4).hex()
        for i in range(n):
            stack = contextlib.AsyncExitStack()
            t = time.perf_counter()
            memories.append(
                await stack.enter_async_context(
                    aiden.open_memory(f"{tmp}/s{i}", config=cfg, store=dsn, session_id=f"b{run}-{i}")
                )
            )
            opens.append(time.perf_counter() - t)
            stacks.append(stack)
        for i, memory in enumerate(memories):
            t = time.perf_counter()
            await memory.append(SessionEvent(type="user_input", content=f"hello from session {i}"))
            appends.append(time.perf_counter() - t)
        await asyncio.sleep(1.0)
        idle = _server_connections(dsn) - base
        threads = threading.active_count() - 1  # not the sampler
        for stack in reversed(stacks):
            t = time.perf_counter()
            await stack.aclose()
            closes.append(time.perf_counter() - t)
        sampling = False
        sampler.join()
        del memories
        return {
            "sessions": n,
            "max_connections": max_connections,
            "connections_peak": peak - base,
            "connections_idle": idle,
            "connections_left": _server_connections(dsn) - base,
            "threads": threads,
            "open_ms": latency_ms(opens),
            "first_append_ms": latency_ms(appends),
            "close_ms": latency_ms(closes),
        }


async def _cycles(n: int) -> dict[str, Any]:
    import aiden
    from aiden import Config, SessionEvent

    cfg = Config(durability="none")
    with tempfile.TemporaryDirectory() as tmp:
        # A first cycle warms the imports and the shared threads.
        async with aiden.open_memory(f"{tmp}/warm", config=cfg) as memory:
            await memory.append(SessionEvent(type="user_input", content="warm"))
        fds0, threads0 = _fds(), threading.active_count()
        t = time.perf_counter()
        for i in range(n):
            async with aiden.open_memory(f"{tmp}/c{i % 50}", config=cfg) as memory:
                await memory.append(SessionEvent(type="user_input", content=f"cycle {i}"))
        elapsed = time.perf_counter() - t
        return {
            "cycles": n,
            "fds_before": fds0,
            "fds_after": _fds(),
            "threads_before": threads0,
            "threads_after": threading.active_count(),
            "cycle_ms_mean": elapsed / n * 1e3,
        }


def _child(argv: list[str]) -> None:
    import anyio

    kind, n = argv[0], int(argv[1])
    run = {"sessions": _sessions, "pg_sessions": _pg_sessions, "cycles": _cycles}[kind]
    result = anyio.run(run, n)
    print(json.dumps(result))


def _run_child(kind: str, n: int) -> dict[str, Any]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(n)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        return {
            "error": proc.stderr.strip().splitlines()[-1]
            if proc.stderr.strip()
            else f"exit {proc.returncode}"
        }
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _postgres(sizes: list[int]) -> None:
    from aiden.testing.pgcluster import server_for_tests

    server = server_for_tests()
    try:
        os.environ["AIDEN_BENCH_PG_DSN"] = server.dsn
        results = [{**_run_child("pg_sessions", n), "sessions": n} for n in sizes]
    finally:
        server.stop()
    rows = [
        [f"{r['sessions']:,}", r["error"], "", "", "", "", "", ""]
        if "error" in r
        else [
            f"{r['sessions']:,}",
            str(r["max_connections"]),
            f"{r['connections_peak']} / {r['connections_idle']} / {r['connections_left']}",
            str(r["threads"]),
            f"{r['open_ms']['p50']:.1f} / {r['open_ms']['p99']:.1f}",
            f"{r['first_append_ms']['p50']:.2f} / {r['first_append_ms']['p99']:.2f}",
            f"{r['close_ms']['p50']:.1f} / {r['close_ms']['p99']:.1f}",
        ]
        for r in results
    ]
    out = table(
        [
            "open sessions (PostgreSQL)",
            "server max_connections",
            "connections peak / idle / after close",
            "threads",
            "open ms p50 / p99",
            "first append ms p50 / p99",
            "close ms p50 / p99",
        ],
        rows,
    )
    print(out)
    print(f"\nwritten {write_result('sessions_postgres', {'sizes': results, 'table': out})}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,1000,10000")
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="sizes 1,100 and 500 cycles")
    parser.add_argument("--postgres", action="store_true", help="the PostgreSQL store's connections instead")
    parser.add_argument(
        "--settle", type=float, default=11.0, help="idle seconds before the second thread count"
    )
    parser.add_argument(
        "--evict-after",
        type=float,
        default=2.0,
        help="evict_after_idle_minutes of the sessions, in seconds (0: never; the default config: 1800)",
    )
    parser.add_argument("--host", action="store_true", help="open every session on one host (aiden.open_host)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    os.environ["AIDEN_BENCH_SETTLE_S"] = str(args.settle)
    os.environ["AIDEN_BENCH_EVICT_S"] = str(args.evict_after)
    os.environ["AIDEN_BENCH_HOST"] = "1" if args.host else "0"
    if args.postgres:
        _postgres([1, 100] if args.quick else [int(s) for s in args.sizes.split(",")])
        return
    sizes = [1, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    cycles = 500 if args.quick else args.cycles
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    results: dict[str, Any] = {"fd_limit": limit, "sizes": []}
    rows = []
    fds_per_session: float | None = None
    for n in sizes:
        if fds_per_session is not None and fds_per_session * n + 64 > limit:
            result: dict[str, Any] = {
                "sessions": n,
                "error": f"not run: {fds_per_session:.0f} descriptors a session x {n:,} > ulimit -n {limit:,}",
            }
        else:
            result = _run_child("sessions", n)
            if "error" not in result:
                fds_per_session = result["fds_per_session"]
            result["sessions"] = n
        results["sizes"].append(result)
        if "error" in result:
            rows.append([f"{n:,}", result["error"], "", "", "", "", "", "", "", ""])
            continue
        settled = result["settled"]
        rows.append(
            [
                f"{n:,}",
                f"{result['threads']} / {result['threads_settled']}",
                f"{result['rss_kb_per_session']:.0f} / {settled['rss_kb_per_session']:.0f}",
                f"{settled['fds_per_session']:.1f} / {settled['tasks_per_session']:.1f}",
                f"{result['open_ms']['p50']:.1f} / {result['open_ms']['p99']:.1f}",
                f"{result['first_append_ms']['p50']:.2f} / {result['first_append_ms']['p99']:.2f}",
                f"{result['append_after_idle_ms']['p50']:.2f} / {result['append_after_idle_ms']['p99']:.2f}",
                f"{result['close_ms']['p50']:.1f} / {result['close_ms']['p99']:.1f}",
                f"{result['fds_left']:+d}",
                str(result["threads_after"]),
            ]
        )
    cycle = _run_child("cycles", cycles)
    results["cycles"] = cycle
    results["table"] = table(
        [
            "open sessions",
            f"threads (total) 1 s / {1 + args.settle:g} s idle",
            f"RSS KB / session 1 s / {1 + args.settle:g} s idle",
            f"fds / tasks per session {1 + args.settle:g} s idle",
            "open ms p50 / p99",
            "first append ms p50 / p99",
            "append after idle ms p50 / p99",
            "close ms p50 / p99",
            "fds left after close",
            "threads after close",
        ],
        rows,
    )
    if "error" in cycle:
        results["table"] += f"\n\n{cycles:,} open/close cycles: {cycle['error']}"
    else:
        results["table"] += (
            f"\n\n{cycles:,} open/append/close cycles: fds {cycle['fds_before']} -> {cycle['fds_after']}, "
            f"threads {cycle['threads_before']} -> {cycle['threads_after']}, {cycle['cycle_ms_mean']:.1f} ms a cycle"
        )
    print(results["table"])
    print(f"\nwritten {write_result('sessions', results)}")


if __name__ == "__main__":
    main()
