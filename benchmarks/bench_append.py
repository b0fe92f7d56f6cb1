"""Durable appends under concurrency: aiden's full actor stack vs this disk's raw limits.

Baselines measured in the same run, side by side:
- per-event fsync: a bare loop of ``os.write`` + ``fsync`` per event;
- group commit: a bare asyncio loop where N appenders enqueue and one task
  writes each batch with one ``write`` + one ``fsync`` in a worker thread.
aiden runs through ``open_memory(...).append`` with the same N appenders.
Reported: throughput, p50/p99/p99.9 append latency, ratios. Median of repeats.

    python benchmarks/bench_append.py [--quick]
"""

from __future__ import annotations

import argparse
import os
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

LINE = b'{"type":"user_input","content":"' + b"x" * 120 + b'","seq":1}\n'


def per_event_fsync(directory: str, n: int) -> tuple[float, list[float]]:
    fd = os.open(os.path.join(directory, "raw.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    lat: list[float] = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        os.write(fd, LINE)
        os.fsync(fd)
        lat.append(time.perf_counter() - s)
    dt = time.perf_counter() - t0
    os.close(fd)
    return n / dt, lat


async def group_commit(directory: str, appenders: int, per: int) -> tuple[float, list[float]]:
    fd = os.open(os.path.join(directory, "gc.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    send, recv = anyio.create_memory_object_stream[tuple[bytes, anyio.Event]](4096)
    lat: list[float] = []

    def commit(data: bytes) -> None:
        os.write(fd, data)
        os.fsync(fd)

    async def writer() -> None:
        async with recv:
            async for first in recv:
                batch = [first]
                while True:
                    try:
                        batch.append(recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await anyio.to_thread.run_sync(commit, b"".join(b for b, _ in batch))
                for _, ev in batch:
                    ev.set()

    async def appender(s: object) -> None:
        for _ in range(per):
            t = time.perf_counter()
            ev = anyio.Event()
            await send.send((LINE, ev))
            await ev.wait()
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        async with anyio.create_task_group() as inner:
            for _ in range(appenders):
                inner.start_soon(appender, None)
        await send.aclose()
    dt = time.perf_counter() - t0
    os.close(fd)
    return appenders * per / dt, lat


async def aiden_appends(directory: str, appenders: int, per: int, durability: str) -> tuple[float, list[float]]:
    lat: list[float] = []
    config = Config(durability=durability, count_compress_after_events=10**9)  # type: ignore[arg-type]
    async with aiden.open_memory(directory, config=config, context_window=10**9) as memory:

        async def appender() -> None:
            for _ in range(per):
                t = time.perf_counter()
                await memory.append(SessionEvent(type="user_input", content="x" * 120))
                lat.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(appenders):
                tg.start_soon(appender)
        dt = time.perf_counter() - t0
    return appenders * per / dt, lat


def run(quick: bool) -> dict[str, object]:
    repeats = 1 if quick else 3
    levels = [1, 8, 64] if quick else [1, 8, 64, 256]
    total = 2000 if quick else 20000
    rows = []
    results: dict[str, object] = {}
    raw_n = 300 if quick else 2000
    raw_tp = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            raw_tp.append(per_event_fsync(d, raw_n)[0])
    raw = summarize(raw_tp)
    results["per_event_fsync_eps"] = raw
    for c in levels:
        per = max(1, total // c)
        gc_tp, ai_tp, ai_nofsync = [], [], []
        gc_lat: list[float] = []
        ai_lat: list[float] = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as d:
                tp, lat = anyio.run(group_commit, d, c, per)
                gc_tp.append(tp)
                gc_lat = lat
            with tempfile.TemporaryDirectory() as d:
                tp, lat = anyio.run(aiden_appends, d, c, per, "fsync")
                ai_tp.append(tp)
                ai_lat = lat
            with tempfile.TemporaryDirectory() as d:
                ai_nofsync.append(anyio.run(aiden_appends, d, c, per, "none")[0])
        g, a, an = summarize(gc_tp), summarize(ai_tp), summarize(ai_nofsync)
        entry = {
            "group_commit_eps": g,
            "aiden_eps": a,
            "aiden_nofsync_eps": an,
            "aiden_p50_ms": pct(ai_lat, 50) * 1e3,
            "aiden_p99_ms": pct(ai_lat, 99) * 1e3,
            "aiden_p999_ms": pct(ai_lat, 99.9) * 1e3,
            "group_commit_p99_ms": pct(gc_lat, 99) * 1e3,
            "ratio_vs_group_commit": a["median"] / g["median"],
            "ratio_vs_per_event_fsync": a["median"] / raw["median"],
        }
        results[f"appenders_{c}"] = entry
        rows.append(
            [
                c,
                f"{a['median']:,.0f} ({a['min']:,.0f}-{a['max']:,.0f})",
                f"{g['median']:,.0f}",
                f"{raw['median']:,.0f}",
                f"{entry['ratio_vs_group_commit']:.2f}x",
                f"{entry['ratio_vs_per_event_fsync']:.1f}x",
                f"{entry['aiden_p50_ms']:.2f}",
                f"{entry['aiden_p99_ms']:.2f}",
                f"{entry['aiden_p999_ms']:.2f}",
                f"{an['median']:,.0f}",
            ]
        )
    md = table(
        [
            "appenders",
            "aiden ev/s (min-max)",
            "bare group commit ev/s",
            "per-event fsync ev/s",
            "aiden / group commit",
            "aiden / per-event fsync",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "aiden durability=none ev/s",
        ],
        rows,
    )
    results["table"] = md
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    results = run(args.quick)
    path = write_result("append", results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
