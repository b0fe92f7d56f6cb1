"""Compaction under load and as history grows.

1. Append latency while compactions with a slow (2 s) summarizer are in flight
   vs with none: 16 paced appenders (append, sleep 2 ms) through the public API
   with ``durability: fsync``; in the loaded runs a compactor calls
   ``maintain(manual=True)`` back to back for the whole window, so a
   compaction is in flight nearly all the time. Unloaded and loaded runs
   alternate; percentiles pool the samples of all repeats; the ratio is also
   given per pair (target: p99 loaded / unloaded <= 1.5x). A probe task
   (sleep 1 ms, measure how late it wakes) records event-loop lag, which shows
   whether a slow append waited on the disk or on a blocked event loop.
2. One compaction after 1k, 10k, 100k events of prior history: the history is
   built through the public API (a compaction every 24 turns, ~96 events, so
   100k events are ~1,000 chunks and ~30 sealed segments), with a storage that
   skips fsync while *building* only. Then, per repeat and size (sizes
   interleaved): open the memory, append 40 turns (160 events), time one
   ``maintain(manual=True)`` with real fsyncs and the embedded extractive
   summarizer (wall and CPU). Opening (recovery) is timed too.
   Target: compaction at 100k / at 1k <= 1.3x.

    python benchmarks/bench_compaction.py [--quick]

``--store postgres`` runs both parts on the file store and on the PostgreSQL
store (``open_memory`` with a PostgreSQL ``store_factory``) in the same run,
one server for the whole run (a throwaway cluster restarted with
``fsync=on``, or ``--pg-dsn``; see ``bench_pg_scaling.py``): part 1 with the
four modes (file/PostgreSQL x without/with compaction) alternating in every
repeat, part 2 at 1k and 10k events of history (PostgreSQL's history is built
through a server that fsyncs). Ratios PostgreSQL / file store are of figures
of the same run. Written to ``results/compaction_postgres.json``.

    python benchmarks/bench_compaction.py --store postgres [--quick] [--pg-dsn DSN] [--pg-fsync off]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, paired, rng, rotate, summarize, table, target, write_result
from bench_pg_scaling import BenchServer, bench_server

import aiden
from aiden import Config, Layout, SessionEvent
from aiden.storage.fs import Storage
from aiden.storage.protocol import SessionStore
from aiden.testing import ScriptedSummarizer, SlowSummarizer

CFG = Config(
    durability="fsync",
    keep_recent_tokens=400,
    hot_window_events=40,
    count_compress_after_events=10**9,
    summarizer_timeout_s=60,
    session_summary_on_close=False,
)
TURNS_PER_CHUNK = 24


def turn(i: int) -> list[SessionEvent]:
    return [
        SessionEvent(
            type="user_input", role="user", content=f"step {i}: update handler h{i} and rerun tests"
        ),
        SessionEvent(type="tool_call", tool_name="run", tool_call_id=f"c{i}", tool_args='{"cmd": "pytest"}'),
        SessionEvent(type="tool_result", tool_call_id=f"c{i}", content=f"{i} passed in 0.{i % 10}s " * 8),
        SessionEvent(type="assistant_output", role="assistant", content=f"handler h{i} updated"),
    ]


class NoSyncStorage(Storage):
    """Real writes without fsync: used only to *build* prior history quickly."""

    def fsync(self, fd: int) -> None:
        pass

    def fsync_dir(self, path: Any) -> None:
        pass


StoreFactory = Callable[[Layout, Storage, Config], SessionStore]


def _store(store: StoreFactory | None) -> dict[str, Any]:
    """``open_memory`` keyword arguments: the file store (default) or ``store``."""
    return {} if store is None else {"store_factory": store}


# --- 1. appends during compaction ---------------------------------------------------


async def appends_during(
    with_compaction: bool, appenders: int, seconds: float, delay: float, store: StoreFactory | None = None
) -> dict[str, Any]:
    lat: list[float] = []
    lag: list[float] = []
    busy = 0.0
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        summarizer = SlowSummarizer(delay)
        async with aiden.open_memory(
            d, config=CFG, summarizer=summarizer, context_window=10**9, **_store(store)
        ) as memory:
            for i in range(50):
                await memory.append_many(turn(i))
            start = time.perf_counter()
            stop = start + seconds

            async def appender(n: int) -> None:
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    await memory.append(SessionEvent(type="user_input", content=f"a{n}"))
                    lat.append(time.perf_counter() - t)
                    await anyio.sleep(0.002)

            async def compactor() -> None:
                nonlocal busy
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    await memory.maintain(manual=True)
                    busy += min(time.perf_counter(), stop) - t

            async def probe() -> None:
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    await anyio.sleep(0.001)
                    lag.append(max(0.0, time.perf_counter() - t - 0.001))

            async with anyio.create_task_group() as tg:
                tg.start_soon(probe)
                for n in range(appenders):
                    tg.start_soon(appender, n)
                if with_compaction:
                    tg.start_soon(compactor)
            compactions = memory.stats().compactions
    return {
        "lat": lat,
        "lag": lag,
        "compactions": compactions,
        "in_flight_share": busy / seconds,
        "p99": latency_ms(lat)["p99"],
    }


# --- 2. compaction cost vs history -------------------------------------------------


def build_history(root: str, events: int, store: StoreFactory | None = None) -> dict[str, float]:
    """Prior history committed as chunks through the real API (fsync skipped while building)."""

    async def go() -> dict[str, float]:
        cfg = Config(
            durability="none",
            keep_recent_tokens=400,
            hot_window_events=40,
            count_compress_after_events=10**9,
            session_summary_on_close=False,
        )
        t0 = time.perf_counter()
        async with aiden.open_memory(
            root,
            config=cfg,
            context_window=10**9,
            storage=NoSyncStorage(),
            summarizer=ScriptedSummarizer(),
            **_store(store),
        ) as memory:
            i = 0
            while i * 4 < events:
                await memory.append_many(turn(i))
                i += 1
                if i % TURNS_PER_CHUNK == 0:
                    await memory.maintain(manual=True)
            await memory.maintain(manual=True)
            chunks = memory.stats().compactions
        return {"events": i * 4, "chunks": chunks, "seconds": time.perf_counter() - t0}

    return anyio.run(go)


async def one_compaction(root: str, first_turn: int, store: StoreFactory | None = None) -> dict[str, float]:
    t0 = time.perf_counter()
    async with aiden.open_memory(root, config=CFG, context_window=10**9, **_store(store)) as memory:
        opened = time.perf_counter() - t0
        for i in range(first_turn, first_turn + 40):
            await memory.append_many(turn(i))
        c = time.process_time()
        t = time.perf_counter()
        outcome = await memory.maintain(manual=True)
        dt = time.perf_counter() - t
        cpu = time.process_time() - c
    assert outcome.compacted, outcome
    return {"wall": dt, "cpu": cpu, "open": opened, "events_compacted": outcome.events_compacted}


def run(
    quick: bool,
    *,
    seconds: float | None = None,
    delay: float | None = None,
    repeats: int | None = None,
    sizes: tuple[int, ...] | None = None,
    appenders: int = 16,
    comp_repeats: int | None = None,
) -> dict[str, Any]:
    seconds = seconds or (3.0 if quick else 8.0)
    delay = delay or (0.5 if quick else 2.0)
    reps = repeats or (1 if quick else 3)
    sizes = sizes or ((1000, 10000) if quick else (1000, 10000, 100000))
    results: dict[str, Any] = {"targets": []}

    # 1. appends during compaction
    base: list[dict[str, Any]] = []
    loaded: list[dict[str, Any]] = []
    for r in range(reps):
        for mode in rotate([False, True], r):
            res = anyio.run(appends_during, mode, appenders, seconds, delay)
            (loaded if mode else base).append(res)
    b_lat = latency_ms([v for x in base for v in x["lat"]])
    l_lat = latency_ms([v for x in loaded for v in x["lat"]])
    b_lag = latency_ms([v for x in base for v in x["lag"]])
    l_lag = latency_ms([v for x in loaded for v in x["lag"]])
    pair = paired([x["p99"] for x in loaded], [x["p99"] for x in base])
    ratio = l_lat["p99"] / b_lat["p99"]
    results["during_compaction"] = {
        "appenders": appenders,
        "seconds_per_run": seconds,
        "summarizer_delay_s": delay,
        "repeats": reps,
        "no_compaction_ms": b_lat,
        "during_compaction_ms": l_lat,
        "loop_lag_no_compaction_ms": b_lag,
        "loop_lag_during_compaction_ms": l_lag,
        "appends_per_s_no_compaction": b_lat["samples"] / (seconds * reps),
        "appends_per_s_during_compaction": l_lat["samples"] / (seconds * reps),
        "ratio_p99_pooled": ratio,
        "ratio_p99_per_pair": pair,
        "ratio_p50_pooled": l_lat["p50"] / b_lat["p50"],
        "compactions": sum(x["compactions"] for x in loaded),
        "compaction_in_flight_share": statistics.mean(x["in_flight_share"] for x in loaded),
    }
    results["targets"].append(
        target(
            f"append p99 during compaction ({delay:g} s summarizer) / without",
            "<= 1.5x",
            ratio,
            ratio <= 1.5,
            f"{ratio:.2f}x pooled; per pair {rng(pair, '.2f', suffix='x')}",
        )
    )

    # 2. compaction cost vs history
    builds: dict[int, dict[str, float]] = {}
    samples: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    comp_reps = comp_repeats or (3 if quick else 5)
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as top:
        roots = {n: str(Path(top) / f"h{n}") for n in sizes}
        for n in sizes:
            builds[n] = build_history(roots[n], n)
        next_turn = {n: 10**6 for n in sizes}
        for r in range(comp_reps):
            for n in rotate(list(sizes), r):
                samples[n].append(anyio.run(one_compaction, roots[n], next_turn[n]))
                next_turn[n] += 40
    small, big = min(sizes), max(sizes)
    hist: dict[str, Any] = {}
    for n in sizes:
        hist[str(n)] = {
            "history_events": builds[n]["events"],
            "history_chunks": builds[n]["chunks"],
            "build_seconds": builds[n]["seconds"],
            "compaction_wall_s": summarize([x["wall"] for x in samples[n]]),
            "compaction_cpu_s": summarize([x["cpu"] for x in samples[n]]),
            "open_s": summarize([x["open"] for x in samples[n]]),
            "events_compacted": summarize([x["events_compacted"] for x in samples[n]]),
            "ratio_wall_vs_smallest": paired(
                [x["wall"] for x in samples[n]], [x["wall"] for x in samples[small]]
            ),
            "ratio_cpu_vs_smallest": paired(
                [x["cpu"] for x in samples[n]], [x["cpu"] for x in samples[small]]
            ),
            "ratio_open_vs_smallest": paired(
                [x["open"] for x in samples[n]], [x["open"] for x in samples[small]]
            ),
        }
    results["compaction_vs_history"] = hist
    hw = hist[str(big)]["compaction_wall_s"]["median"] / hist[str(small)]["compaction_wall_s"]["median"]
    results["ratio_history"] = hw
    results["targets"].append(
        target(
            f"one compaction after {big:,} / after {small:,} events of history",
            "<= 1.3x",
            hw,
            hw <= 1.3,
            f"{hw:.2f}x (median wall; CPU {hist[str(big)]['ratio_cpu_vs_smallest']['median']:.2f}x)",
        )
    )

    d = results["during_compaction"]
    rows1 = [
        [
            f"{appenders} appenders, no compaction",
            f"{b_lat['p50']:.2f}",
            f"{b_lat['p99']:.2f}",
            f"{b_lat['p999']:.2f}",
            f"{b_lat['max']:.1f}",
            f"{d['appends_per_s_no_compaction']:,.0f}",
            f"{b_lag['p99']:.1f} / {b_lag['max']:.0f}",
            "",
            "",
        ],
        [
            f"{appenders} appenders, compactions in flight ({delay:g} s summarizer)",
            f"{l_lat['p50']:.2f}",
            f"{l_lat['p99']:.2f}",
            f"{l_lat['p999']:.2f}",
            f"{l_lat['max']:.1f}",
            f"{d['appends_per_s_during_compaction']:,.0f}",
            f"{l_lag['p99']:.1f} / {l_lag['max']:.0f}",
            f"{d['compactions']} ({d['compaction_in_flight_share'] * 100:.0f}% of the time)",
            f"{ratio:.2f}x (pairs {rng(pair, '.2f', suffix='x')})",
        ],
    ]
    results["table_during"] = table(
        [
            "appends",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
            "appends/s",
            "loop lag p99 / max ms",
            "compactions (in flight)",
            "p99 ratio (target <= 1.5x)",
        ],
        rows1,
    )
    rows2 = []
    for n in sizes:
        h = hist[str(n)]
        rows2.append(
            [
                f"{h['history_events']:,} events ({h['history_chunks']:,} chunks)",
                rng(h["compaction_wall_s"], ".1f", 1e3),
                rng(h["ratio_wall_vs_smallest"], ".2f", suffix="x"),
                rng(h["compaction_cpu_s"], ".1f", 1e3),
                rng(h["ratio_cpu_vs_smallest"], ".2f", suffix="x"),
                f"{h['events_compacted']['median']:.0f}",
                rng(h["open_s"], ".1f", 1e3),
                rng(h["ratio_open_vs_smallest"], ".1f", suffix="x"),
            ]
        )
    results["table_history"] = table(
        [
            "prior history",
            "compaction wall ms",
            "wall vs 1k",
            "compaction CPU ms",
            "CPU vs 1k",
            "events compacted",
            "open_memory ms",
            "open vs 1k",
        ],
        rows2,
    )
    results["table"] = results["table_during"] + "\n\n" + results["table_history"]
    return results


# --- --store postgres: both parts on the file store and the PostgreSQL store ------------


def _pg_factory(server: BenchServer, session_id: str | None = None) -> StoreFactory:
    from aiden.storage.postgres import postgres_store_factory

    return postgres_store_factory(server.dsn, session_id or f"bench-{uuid.uuid4().hex[:12]}")


def run_postgres(
    quick: bool,
    *,
    seconds: float | None = None,
    delay: float | None = None,
    repeats: int | None = None,
    sizes: tuple[int, ...] | None = None,
    appenders: int = 16,
    comp_repeats: int | None = None,
    dsn: str | None = None,
    pg_fsync: bool = True,
) -> dict[str, Any]:
    """Parts 1 and 2 for both stores on one server; PostgreSQL / file store ratios of the same run."""
    seconds = seconds or (2.0 if quick else 6.0)
    delay = delay or (0.5 if quick else 2.0)
    reps = repeats or (1 if quick else 3)
    sizes = sizes or ((500, 2000) if quick else (1000, 10000))
    comp_reps = comp_repeats or (2 if quick else 5)
    stores = ("file", "postgres")
    load0 = os.getloadavg()
    results: dict[str, Any] = {}
    with bench_server(dsn, fsync=pg_fsync) as server:
        results["server"] = server.describe()
        # 1. appends during compaction: every (store, mode) once per repeat, rotated.
        modes = [(st, loaded) for st in stores for loaded in (False, True)]
        during: dict[tuple[str, bool], list[dict[str, Any]]] = {m: [] for m in modes}
        for r in range(reps):
            for st, loaded in rotate(modes, r):
                factory = _pg_factory(server) if st == "postgres" else None
                during[(st, loaded)].append(
                    anyio.run(appends_during, loaded, appenders, seconds, delay, factory)
                )
        # 2. one compaction vs history, each store its own histories.
        builds: dict[tuple[str, int], dict[str, float]] = {}
        samples: dict[tuple[str, int], list[dict[str, float]]] = {(st, n): [] for st in stores for n in sizes}
        with tempfile.TemporaryDirectory(prefix="aiden-bench-") as top:
            cells = [(st, n) for st in stores for n in sizes]
            factories = {
                c: (
                    _pg_factory(server, f"bench-{uuid.uuid4().hex[:8]}-h{c[1]}")
                    if c[0] == "postgres"
                    else None
                )
                for c in cells
            }
            roots = {c: str(Path(top) / f"{c[0]}-h{c[1]}") for c in cells}
            for c in cells:
                builds[c] = build_history(roots[c], c[1], factories[c])
            next_turn = dict.fromkeys(cells, 10**6)
            for r in range(comp_reps):
                for c in rotate(cells, r):
                    samples[c].append(anyio.run(one_compaction, roots[c], next_turn[c], factories[c]))
                    next_turn[c] += 40
    results["loadavg_before_after"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
    results["during_compaction"] = {}
    rows1 = []
    p99s: dict[tuple[str, bool], float] = {}
    for st in stores:
        base, loaded = during[(st, False)], during[(st, True)]
        b, lo = (
            latency_ms([v for x in base for v in x["lat"]]),
            latency_ms([v for x in loaded for v in x["lat"]]),
        )
        p99s[(st, False)], p99s[(st, True)] = b["p99"], lo["p99"]
        pair = paired([x["p99"] for x in loaded], [x["p99"] for x in base])
        d = {
            "appenders": appenders,
            "seconds_per_run": seconds,
            "summarizer_delay_s": delay,
            "repeats": reps,
            "no_compaction_ms": b,
            "during_compaction_ms": lo,
            "appends_per_s_no_compaction": b["samples"] / (seconds * reps),
            "appends_per_s_during_compaction": lo["samples"] / (seconds * reps),
            "ratio_p99_pooled": lo["p99"] / b["p99"],
            "ratio_p99_per_pair": pair,
            "compactions": sum(x["compactions"] for x in loaded),
            "compaction_in_flight_share": statistics.mean(x["in_flight_share"] for x in loaded),
        }
        results["during_compaction"][st] = d
        name = "file store" if st == "file" else "PostgreSQL"
        for label, lat, aps, extra in (
            ("no compaction", b, d["appends_per_s_no_compaction"], ["", ""]),
            (
                f"compactions in flight ({delay:g} s summarizer)",
                lo,
                d["appends_per_s_during_compaction"],
                [
                    f"{d['compactions']} ({d['compaction_in_flight_share'] * 100:.0f}% of the time)",
                    f"{d['ratio_p99_pooled']:.2f}x (pairs {rng(pair, '.2f', suffix='x')})",
                ],
            ),
        ):
            rows1.append(
                [
                    f"{name}, {appenders} appenders, {label}",
                    f"{lat['p50']:.2f}",
                    f"{lat['p99']:.2f}",
                    f"{lat['p999']:.2f}",
                    f"{lat['max']:.1f}",
                    f"{aps:,.0f}",
                    *extra,
                ]
            )
    results["ratio_p99_pg_vs_file_no_compaction"] = p99s[("postgres", False)] / p99s[("file", False)]
    results["ratio_p99_pg_vs_file_during_compaction"] = p99s[("postgres", True)] / p99s[("file", True)]
    results["table_during"] = table(
        [
            "appends",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
            "appends/s",
            "compactions (in flight)",
            "p99 during / without",
        ],
        rows1,
    )
    hist: dict[str, Any] = {}
    rows2 = []
    small = min(sizes)
    for st, n in [(st, n) for st in stores for n in sizes]:
        xs = samples[(st, n)]
        h: dict[str, Any] = {
            "history_events": builds[(st, n)]["events"],
            "history_chunks": builds[(st, n)]["chunks"],
            "build_seconds": builds[(st, n)]["seconds"],
            "compaction_wall_s": summarize([x["wall"] for x in xs]),
            "compaction_cpu_s": summarize([x["cpu"] for x in xs]),
            "open_s": summarize([x["open"] for x in xs]),
            "ratio_wall_vs_smallest": paired(
                [x["wall"] for x in xs], [x["wall"] for x in samples[(st, small)]]
            ),
        }
        if st == "postgres":
            h["ratio_wall_vs_file"] = paired(
                [x["wall"] for x in xs], [x["wall"] for x in samples[("file", n)]]
            )
        hist[f"{st}/{n}"] = h
        rows2.append(
            [
                "file store" if st == "file" else "PostgreSQL",
                f"{h['history_events']:,} events ({h['history_chunks']:,} chunks)",
                rng(h["compaction_wall_s"], ".1f", 1e3),
                rng(h["ratio_wall_vs_smallest"], ".2f", suffix="x"),
                rng(h["ratio_wall_vs_file"], ".2f", suffix="x") if st == "postgres" else "",
                rng(h["compaction_cpu_s"], ".1f", 1e3),
                rng(h["open_s"], ".1f", 1e3),
                f"{h['build_seconds']:.1f}",
            ]
        )
    results["compaction_vs_history"] = hist
    results["table_history"] = table(
        [
            "store",
            "prior history",
            "compaction wall ms",
            f"wall vs {small:,}",
            "PostgreSQL / file",
            "compaction CPU ms (client)",
            "open_memory ms",
            "history build s",
        ],
        rows2,
    )
    results["table"] = results["table_during"] + "\n\n" + results["table_history"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="shorter windows, 0.5 s summarizer, up to 10k events"
    )
    parser.add_argument(
        "--store",
        choices=("file", "postgres"),
        default="file",
        help="postgres: both parts on the file store and the PostgreSQL store, side by side",
    )
    parser.add_argument(
        "--pg-dsn", help="an existing server (default $AIDEN_TEST_PG_DSN, else a throwaway cluster)"
    )
    parser.add_argument(
        "--pg-fsync", choices=("on", "off"), default="on", help="fsync of a cluster started here"
    )
    args = parser.parse_args()
    if args.store == "postgres":
        results = run_postgres(args.quick, dsn=args.pg_dsn, pg_fsync=args.pg_fsync == "on")
        print(results["server"])
    else:
        results = run(args.quick)
    path = write_result("compaction_postgres" if args.store == "postgres" else "compaction", results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
