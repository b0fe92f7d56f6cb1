"""PostgreSQL store: N sessions x M worker processes, and the server the PostgreSQL benchmarks share.

Each worker is an OS process (``python bench_pg_scaling.py --worker ...``)
that opens N memories through the public API (``aiden.open_memory`` with
``store_factory=postgres_store_factory(dsn, session_id)``, one root per
memory for its recall cache) and runs ``tasks`` appenders on each
(``durability: fsync``, one 120-byte event per append) for a fixed window;
all workers start together (each reports ready, the parent then says go).
Layouts:

- ``independent``: every worker has its own N sessions (N x M sessions in all):
  sessions share nothing but the server, so throughput should grow with M
  until the server (or the 2 cores it shares with the workers) saturates;
- ``shared``: all M workers append to the same N sessions (the multi-worker
  case of one conversation): every append of a session locks its counter row,
  so this is where workers contend.

The filesystem store runs the ``independent`` grid too, in the same run
(each worker's sessions in its own directory), so every PostgreSQL figure has
a file-store figure measured minutes, not days, apart. Reported: aggregate
events/s (median of repeats, min-max), the paired ratio PostgreSQL / file
store, the speedup over M=1, append latency p50/p99 pooled over the repeats,
and CPU seconds per second of window of the workers and of the server (from
/proc, when the server was started here): a sum near the usable cores means
the machine, not the store, is the limit.

    python benchmarks/bench_pg_scaling.py [--quick] [--pg-dsn DSN] [--pg-fsync off]

Without ``--pg-dsn`` (or ``$AIDEN_TEST_PG_DSN``) a throwaway cluster is
started (:mod:`aiden.testing.pgcluster`: initdb in a temp dir, 127.0.0.1,
a non-root server user) and restarted with ``fsync=on`` (the test cluster
runs with ``fsync=off``), so PostgreSQL commits are as durable as the file
store's ``durability: fsync``; ``--pg-fsync off`` keeps the test settings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, paired, rng, rotate, summarize, table, write_result

from aiden.testing.pgcluster import TEST_DSN_ENV, PgServer, PgUnavailable, start_cluster

CONTENT = "x" * 120
STORES = ("file", "postgres")


# --- the benchmark server ------------------------------------------------------------


@dataclass
class BenchServer:
    """A database for one benchmark run: its DSN, what the server is, and its CPU use when started here."""

    dsn: str
    settings: dict[str, str]
    cpu_seconds: Callable[[], float] | None
    """Total CPU seconds of the server's processes so far (None: not ours, /proc cannot see it)."""

    def describe(self) -> str:
        """One line: version and the settings that decide what a commit costs."""
        s = self.settings
        return (
            f"PostgreSQL {s.get('server_version', '?')}, fsync={s.get('fsync')}, "
            f"synchronous_commit={s.get('synchronous_commit')}, wal_sync_method={s.get('wal_sync_method')}, "
            f"full_page_writes={s.get('full_page_writes')}, shared_buffers={s.get('shared_buffers')}"
        )


def _ticks(pid: int) -> tuple[int, int]:
    """(own utime+stime, ppid) of a process, or (0, -1) when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0, -1
    fields = stat.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of stat(5)); utime/stime are fields 14/15, cutime/cstime 16/17.
    return int(fields[11]) + int(fields[12]), int(fields[1])


def _server_cpu(postmaster: int) -> Callable[[], float]:
    """CPU seconds of the postmaster, its live children and (via cutime/cstime) its reaped ones."""
    hz = os.sysconf("SC_CLK_TCK")

    def total() -> float:
        try:
            stat = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        ticks = sum(int(x) for x in stat[11:15])
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                own, ppid = _ticks(int(entry.name))
                if ppid == postmaster:
                    ticks += own
        return ticks / hz

    return total


def _pg_ctl(server: PgServer, *args: str) -> None:
    assert server.bindir is not None and server.base is not None
    argv = [str(server.bindir / "pg_ctl"), "-D", str(server.base / "data"), *args]
    if server.run_as is not None:
        argv = ["runuser", "-u", server.run_as, "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise PgUnavailable(
            f"pg_ctl {args[-1]} exited {done.returncode}: {(done.stderr or done.stdout)[-500:]}"
        )


def _durable_restart(server: PgServer) -> None:
    """Restart a cluster started here with fsync and full_page_writes on (same port and socket dir)."""
    from psycopg.conninfo import conninfo_to_dict

    assert server.base is not None
    port = conninfo_to_dict(server.dsn)["port"]
    _pg_ctl(server, "-m", "fast", "-w", "stop")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {server.base} -c fsync=on -c full_page_writes=on"
    _pg_ctl(server, "-l", str(server.base / "server.log"), "-o", options, "-w", "-t", "60", "start")


@contextmanager
def bench_server(dsn: str | None = None, *, fsync: bool = True) -> Iterator[BenchServer]:
    """A fresh database on ``dsn`` (else ``$AIDEN_TEST_PG_DSN``, else a throwaway cluster), dropped after.

    :class:`PgUnavailable` says why no server could be had.
    """
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    dsn = dsn or os.environ.get(TEST_DSN_ENV) or None
    server = PgServer(dsn) if dsn else start_cluster()
    try:
        cpu: Callable[[], float] | None = None
        if server.owned:
            if fsync:
                _durable_restart(server)
            assert server.base is not None
            postmaster = int((server.base / "data" / "postmaster.pid").read_text().split()[0])
            cpu = _server_cpu(postmaster)
        name = f"aiden_bench_{uuid.uuid4().hex[:10]}"
        try:
            with psycopg.connect(server.dsn, autocommit=True, connect_timeout=10) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                keys = (
                    "server_version",
                    "fsync",
                    "synchronous_commit",
                    "wal_sync_method",
                    "full_page_writes",
                    "shared_buffers",
                )
                settings = {k: str(conn.execute(f"SHOW {k}").fetchone()[0]) for k in keys}  # type: ignore[index]
        except psycopg.Error as exc:
            raise PgUnavailable(f"cannot create the benchmark database: {type(exc).__name__}") from exc
        try:
            yield BenchServer(make_conninfo(server.dsn, dbname=name), settings, cpu)
        finally:
            with psycopg.connect(server.dsn, autocommit=True, connect_timeout=10) as conn:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    finally:
        server.stop()


# --- one worker process ----------------------------------------------------------------


async def _worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Open the sessions, say ready, wait for go, append for the window; latencies and CPU."""
    import anyio

    import aiden
    from aiden import Config, SessionEvent
    from aiden.storage.postgres import postgres_store_factory

    config = Config(durability="fsync", count_compress_after_events=10**9, session_summary_on_close=False)
    event = SessionEvent(type="user_input", role="user", content=CONTENT)
    lat: list[float] = []
    memories: list[Any] = []
    async with AsyncExitStack() as stack:
        for sid in spec["sessions"]:
            kwargs: dict[str, Any] = {}
            if spec["store"] == "postgres":
                # One root per memory and worker: the recall cache is per worker.
                root = Path(spec["root"]) / f"{sid}-w{spec['worker']}"
                kwargs["store_factory"] = postgres_store_factory(spec["dsn"], sid, max_size=4)
            else:
                root = Path(spec["root"]) / sid  # the file store: the session is its directory
            memory = await stack.enter_async_context(
                aiden.open_memory(root, config=config, context_window=10**9, **kwargs)
            )
            await memory.append(event)  # warm: pool connected, session rows created
            memories.append(memory)
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        seconds = float(spec["seconds"])

        async def appender(memory: Any, stop: float) -> None:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                await memory.append(event)
                lat.append(time.perf_counter() - t)

        c0 = time.process_time()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for memory in memories:
                for _ in range(int(spec["tasks"])):
                    tg.start_soon(appender, memory, t0 + seconds)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return {"events": len(lat), "wall": wall, "cpu": cpu, "lat": lat}


def worker_main(spec_json: str) -> None:
    """Entry point of a worker process: the spec as JSON in argv, the result as JSON on stdout's last line."""
    import anyio

    result = anyio.run(_worker, json.loads(spec_json))
    print(json.dumps(result), flush=True)


# --- the grid ----------------------------------------------------------------------------


def one_run(
    store: str,
    layout: str,
    sessions: int,
    workers: int,
    tasks: int,
    seconds: float,
    server: BenchServer | None,
) -> dict[str, Any]:
    """M worker processes started together; aggregate events/s, pooled latencies, CPU of workers and server."""
    run_id = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as root:
        procs = []
        for w in range(workers):
            owner = "all" if layout == "shared" else f"w{w}"
            ids = [f"b{run_id}-{owner}-s{s}" for s in range(sessions)]
            spec = {
                "store": store,
                "dsn": server.dsn if server else "",
                "sessions": ids,
                "root": root,
                "worker": w,
                "tasks": tasks,
                "seconds": seconds,
            }
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        try:
            for p in procs:
                assert p.stdout is not None
                line = p.stdout.readline()
                if line.strip() != "ready":
                    raise RuntimeError(f"worker did not start (exit {p.wait()}): {line!r}")
            s0 = server.cpu_seconds() if server and server.cpu_seconds else float("nan")
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=seconds + 120)[0] for p in procs]
            s1 = server.cpu_seconds() if server and server.cpu_seconds else float("nan")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for p in procs:
            if p.returncode != 0:
                raise RuntimeError(f"worker exited {p.returncode}")
    res = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    wall = max(r["wall"] for r in res)
    events = sum(r["events"] for r in res)
    return {
        "events": events,
        "eps": events / wall,
        "lat": [v for r in res for v in r["lat"]],
        "worker_cpu_per_s": sum(r["cpu"] for r in res) / wall,
        "server_cpu_per_s": (s1 - s0) / wall,
    }


def grid(quick: bool, sessions: tuple[int, ...], workers: tuple[int, ...]) -> list[tuple[str, str, int, int]]:
    """(store, layout, N, M) in the order they run."""
    cells = [(st, "independent", n, m) for n in sessions for m in workers for st in STORES]
    cells += [("postgres", "shared", 1, m) for m in workers if m > 1]
    return cells


def run(
    quick: bool,
    *,
    sessions: tuple[int, ...] = (1, 4),
    workers: tuple[int, ...] = (1, 2, 4),
    tasks: int = 8,
    repeats: int | None = None,
    seconds: float | None = None,
    dsn: str | None = None,
    pg_fsync: bool = True,
) -> dict[str, Any]:
    """Every cell of the grid ``repeats`` times (rotated order per repeat), one server for all."""
    repeats = repeats or (1 if quick else 3)
    seconds = seconds or (1.0 if quick else 3.0)
    cells = grid(quick, sessions, workers)
    samples: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {c: [] for c in cells}
    load0 = os.getloadavg()
    with bench_server(dsn, fsync=pg_fsync) as server:
        for r in range(repeats):
            for cell in rotate(cells, r):
                store, layout, n, m = cell
                samples[cell].append(one_run(store, layout, n, m, tasks, seconds, server))
        described = server.describe()
    load1 = os.getloadavg()
    results: dict[str, Any] = {
        "workload": "N sessions x M worker processes appending through the public API (durability: fsync)",
        "server": described,
        "tasks_per_session_per_worker": tasks,
        "seconds_per_run": seconds,
        "repeats": repeats,
        "loadavg_before_after": [round(load0[0], 2), round(load1[0], 2)],
        "cells": {},
    }
    rows = []
    for cell in cells:
        store, layout, n, m = cell
        xs = samples[cell]
        eps = [x["eps"] for x in xs]
        entry: dict[str, Any] = {
            "store": store,
            "layout": layout,
            "sessions_per_worker": n,
            "workers": m,
            "eps": summarize(eps),
            "latency_ms": latency_ms([v for x in xs for v in x["lat"]]),
            "worker_cpu_per_s": summarize([x["worker_cpu_per_s"] for x in xs]),
            "server_cpu_per_s": summarize([x["server_cpu_per_s"] for x in xs]),
        }
        one = samples.get((store, layout, n, 1)) or samples[("postgres", "independent", n, 1)]
        entry["speedup_vs_1_worker"] = paired(eps, [x["eps"] for x in one])
        if store == "postgres" and ("file", layout, n, m) in samples:
            entry["ratio_vs_file"] = paired(eps, [x["eps"] for x in samples[("file", layout, n, m)]])
        results["cells"][f"{store}/{layout}/N{n}/M{m}"] = entry
        lat = entry["latency_ms"]
        ratio = entry.get("ratio_vs_file")
        srv = entry["server_cpu_per_s"]["median"]
        rows.append(
            [
                store,
                layout,
                f"{n} x {m}" if layout == "independent" else f"{n} shared by {m}",
                n * m * tasks,
                rng(entry["eps"]),
                rng(entry["speedup_vs_1_worker"], ".2f", suffix="x"),
                rng(ratio, ".2f", suffix="x") if ratio else "",
                f"{lat['p50']:.2f} / {lat['p99']:.2f}",
                f"{entry['worker_cpu_per_s']['median']:.2f}"
                + (f" + {srv:.2f}" if store == "postgres" else ""),
            ]
        )
    results["table"] = table(
        [
            "store",
            "layout",
            "sessions x workers",
            "appenders",
            "events/s",
            "vs 1 worker",
            "PostgreSQL / file",
            "p50 / p99 ms",
            "CPU s/s workers (+ server)",
        ],
        rows,
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one repeat, 1 s windows")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sessions", default="1,4", help="comma-separated N (sessions per worker)")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated M (worker processes)")
    parser.add_argument("--tasks", type=int, default=8, help="appenders per session per worker")
    parser.add_argument(
        "--pg-dsn", help=f"an existing server (default ${TEST_DSN_ENV}, else a throwaway cluster)"
    )
    parser.add_argument(
        "--pg-fsync", choices=("on", "off"), default="on", help="fsync of a cluster started here"
    )
    parser.add_argument("--name", default="pg_scaling", help="result file name")
    args = parser.parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    results = run(
        args.quick,
        sessions=tuple(int(x) for x in args.sessions.split(",")),
        workers=tuple(int(x) for x in args.workers.split(",")),
        tasks=args.tasks,
        dsn=args.pg_dsn,
        pg_fsync=args.pg_fsync == "on",
    )
    path = write_result(args.name, results)
    print(results["server"])
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
