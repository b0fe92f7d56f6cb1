"""Compaction under load and as history grows.

1. Append p99 while compactions with a slow (2 s) summarizer are in flight vs
   append p99 with no compaction, same appenders, same run (target <= 1.5x).
2. One compaction after 1k, 10k, 100k events of prior history
   (target: 100k / 1k <= 1.3x: cost follows the hot window, not the history).

    python benchmarks/bench_compaction.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct, summarize, table, write_result

import aiden
from aiden import Config, SessionEvent
from aiden.testing import SlowSummarizer

CFG = Config(
    durability="fsync",
    keep_recent_tokens=400,
    hot_window_events=40,
    count_compress_after_events=10**9,
    summarizer_timeout_s=60,
)


def turn(i: int) -> list[SessionEvent]:
    return [
        SessionEvent(type="user_input", role="user", content=f"step {i}: update handler h{i} and rerun tests"),
        SessionEvent(type="tool_call", tool_name="run", tool_call_id=f"c{i}", tool_args='{"cmd": "pytest"}'),
        SessionEvent(type="tool_result", tool_call_id=f"c{i}", content=f"{i} passed in 0.{i % 10}s " * 8),
        SessionEvent(type="assistant_output", role="assistant", content=f"handler h{i} updated"),
    ]


async def appends_p99(with_compaction: bool, appenders: int, seconds: float, delay: float) -> tuple[float, float, int]:
    lat: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        summarizer = SlowSummarizer(delay)
        async with aiden.open_memory(d, config=CFG, summarizer=summarizer, context_window=10**9) as memory:
            for i in range(50):
                await memory.append_many(turn(i))
            stop = time.perf_counter() + seconds

            async def appender(n: int) -> None:
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    await memory.append(SessionEvent(type="user_input", content=f"a{n}"))
                    lat.append(time.perf_counter() - t)
                    await anyio.sleep(0.002)

            async def compactor() -> None:
                while time.perf_counter() < stop:
                    await memory.maintain(manual=True)

            async with anyio.create_task_group() as tg:
                for n in range(appenders):
                    tg.start_soon(appender, n)
                if with_compaction:
                    tg.start_soon(compactor)
            compactions = memory.stats().compactions
    return pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, compactions


def build_history(root: str, events: int) -> None:
    """Prior history committed as chunks (built through the real API with durability off)."""

    async def go() -> None:
        cfg = Config(durability="none", keep_recent_tokens=400, hot_window_events=40, count_compress_after_events=10**9)
        async with aiden.open_memory(root, config=cfg, context_window=10**9) as memory:
            per = 2000
            done = 0
            while done < events:
                batch = []
                for i in range(done // 4, (done + per) // 4):
                    batch.extend(turn(i))
                await memory.append_many(batch)
                done += len(batch)
                await memory.maintain(manual=True)

    anyio.run(go)


async def one_compaction(root: str) -> float:
    async with aiden.open_memory(root, config=CFG, context_window=10**9) as memory:
        for i in range(10**6, 10**6 + 40):
            await memory.append_many(turn(i))
        t = time.perf_counter()
        outcome = await memory.maintain(manual=True)
        dt = time.perf_counter() - t
    assert outcome.compacted, outcome
    return dt


def run(quick: bool) -> dict[str, object]:
    results: dict[str, object] = {}
    seconds = 3.0 if quick else 8.0
    delay = 0.5 if quick else 2.0
    base, loaded = [], []
    reps = 1 if quick else 3
    comps = 0
    for _ in range(reps):
        base.append(anyio.run(appends_p99, False, 16, seconds, delay)[1])
        _, p99, c = anyio.run(appends_p99, True, 16, seconds, delay)
        loaded.append(p99)
        comps += c
    b, lo = summarize(base), summarize(loaded)
    results["append_p99_ms_no_compaction"] = b
    results["append_p99_ms_during_compaction"] = lo
    results["compactions_during"] = comps
    results["ratio_p99"] = lo["median"] / b["median"]
    sizes = [1000, 10000] if quick else [1000, 10000, 100000]
    cost: dict[int, dict[str, float]] = {}
    for n in sizes:
        samples = []
        with tempfile.TemporaryDirectory() as d:
            build_history(d, n)
            for _ in range(3):
                samples.append(anyio.run(one_compaction, d))
        cost[n] = summarize(samples)
    results["compaction_seconds_by_history"] = {str(k): v for k, v in cost.items()}
    big = max(sizes)
    results["ratio_history"] = cost[big]["median"] / cost[1000]["median"]
    rows = [
        ["append p99 (16 appenders), no compaction", f"{b['median']:.2f} ms ({b['min']:.2f}-{b['max']:.2f})", ""],
        [f"append p99 while compacting ({delay:g}s summarizer)", f"{lo['median']:.2f} ms ({lo['min']:.2f}-{lo['max']:.2f})",
         f"{results['ratio_p99']:.2f}x (target <= 1.5x)"],
    ]
    for n in sizes:
        rows.append([f"one compaction after {n:,} events of history", f"{cost[n]['median'] * 1e3:.1f} ms",
                     f"{cost[n]['median'] / cost[1000]['median']:.2f}x vs 1k" + (" (target <= 1.3x)" if n == big else "")])
    results["table"] = table(["workload", "median (min-max)", "ratio"], rows)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    results = run(args.quick)
    path = write_result("compaction", results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
