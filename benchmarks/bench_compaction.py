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
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, paired, rng, rotate, summarize, table, target, write_result

import aiden
from aiden import Config, SessionEvent
from aiden.storage.fs import Storage
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
        SessionEvent(type="user_input", role="user", content=f"step {i}: update handler h{i} and rerun tests"),
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


# --- 1. appends during compaction ---------------------------------------------------

async def appends_during(with_compaction: bool, appenders: int, seconds: float, delay: float) -> dict[str, Any]:
    lat: list[float] = []
    lag: list[float] = []
    busy = 0.0
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        summarizer = SlowSummarizer(delay)
        async with aiden.open_memory(d, config=CFG, summarizer=summarizer, context_window=10**9) as memory:
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

def build_history(root: str, events: int) -> dict[str, float]:
    """Prior history committed as chunks through the real API (fsync skipped while building)."""

    async def go() -> dict[str, float]:
        cfg = Config(
            durability="none", keep_recent_tokens=400, hot_window_events=40, count_compress_after_events=10**9,
            session_summary_on_close=False,
        )
        t0 = time.perf_counter()
        async with aiden.open_memory(
            root, config=cfg, context_window=10**9, storage=NoSyncStorage(), summarizer=ScriptedSummarizer()
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


async def one_compaction(root: str, first_turn: int) -> dict[str, float]:
    t0 = time.perf_counter()
    async with aiden.open_memory(root, config=CFG, context_window=10**9) as memory:
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
        target(f"append p99 during compaction ({delay:g} s summarizer) / without", "<= 1.5x", ratio, ratio <= 1.5,
               f"{ratio:.2f}x pooled; per pair {rng(pair, '.2f', suffix='x')}")
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
            "ratio_wall_vs_smallest": paired([x["wall"] for x in samples[n]], [x["wall"] for x in samples[small]]),
            "ratio_cpu_vs_smallest": paired([x["cpu"] for x in samples[n]], [x["cpu"] for x in samples[small]]),
            "ratio_open_vs_smallest": paired([x["open"] for x in samples[n]], [x["open"] for x in samples[small]]),
        }
    results["compaction_vs_history"] = hist
    hw = hist[str(big)]["compaction_wall_s"]["median"] / hist[str(small)]["compaction_wall_s"]["median"]
    results["ratio_history"] = hw
    results["targets"].append(
        target(f"one compaction after {big:,} / after {small:,} events of history", "<= 1.3x", hw, hw <= 1.3,
               f"{hw:.2f}x (median wall; CPU {hist[str(big)]['ratio_cpu_vs_smallest']['median']:.2f}x)")
    )

    d = results["during_compaction"]
    rows1 = [
        [f"{appenders} appenders, no compaction", f"{b_lat['p50']:.2f}", f"{b_lat['p99']:.2f}", f"{b_lat['p999']:.2f}",
         f"{b_lat['max']:.1f}", f"{d['appends_per_s_no_compaction']:,.0f}", f"{b_lag['p99']:.1f} / {b_lag['max']:.0f}",
         "", ""],
        [f"{appenders} appenders, compactions in flight ({delay:g} s summarizer)", f"{l_lat['p50']:.2f}",
         f"{l_lat['p99']:.2f}", f"{l_lat['p999']:.2f}", f"{l_lat['max']:.1f}",
         f"{d['appends_per_s_during_compaction']:,.0f}", f"{l_lag['p99']:.1f} / {l_lag['max']:.0f}",
         f"{d['compactions']} ({d['compaction_in_flight_share'] * 100:.0f}% of the time)",
         f"{ratio:.2f}x (pairs {rng(pair, '.2f', suffix='x')})"],
    ]
    results["table_during"] = table(
        ["appends", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "appends/s", "loop lag p99 / max ms",
         "compactions (in flight)", "p99 ratio (target <= 1.5x)"],
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
        ["prior history", "compaction wall ms", "wall vs 1k", "compaction CPU ms", "CPU vs 1k",
         "events compacted", "open_memory ms", "open vs 1k"],
        rows2,
    )
    results["table"] = results["table_during"] + "\n\n" + results["table_history"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter windows, 0.5 s summarizer, up to 10k events")
    args = parser.parse_args()
    results = run(args.quick)
    path = write_result("compaction", results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
