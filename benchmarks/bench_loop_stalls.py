"""How long aiden holds the event loop of the agent that embeds it, on real sessions.

An agent loop shares its event loop with aiden: while aiden computes on it
(a summary, a must-keep scan, a prompt fit), every other task of the agent
waits, its appends included. This bench feeds real sessions through an agent
loop, as an agent would, with a probe task that sleeps 1 ms and records how
late it wakes and which operation was in progress:

* the SWE-agent sessions of ``$AIDEN_REAL_DATA/swe-agent`` (tool output) and
  the first LoCoMo conversations of ``$AIDEN_REAL_DATA/locomo`` (long chat),
  ``build_messages`` before each model call, ``record_usage`` after it, every
  event appended, a small window so the history compacts;
* then ``dream()`` (the long-term memory's merge of the session's history)
  and ``checkpoint()``, which an agent runs between tasks.

Baseline, same run: the same probe while the memory sits open and idle (the
loop's own lateness on this machine). Reported per operation: the worst stall
and its p99, and the worst stall as a multiple of the idle p99.

    AIDEN_REAL_DATA=../shared/data python benchmarks/bench_loop_stalls.py [--window 8000] [--locomo 2]

Results: ``benchmarks/results/loop_stalls.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "governance"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, machine, table, write_result  # noqa: E402

import aiden  # noqa: E402
from aiden import SessionEvent  # noqa: E402

_PROBE_S = 0.001


class Probe:
    """Sleeps 1 ms over and over; records each wake's lateness under the operation then in progress."""

    def __init__(self) -> None:
        self.op = "idle"
        self.lags: dict[str, list[float]] = defaultdict(list)
        self.stop = False

    async def run(self) -> None:
        while not self.stop:
            op = self.op
            t = time.perf_counter()
            await anyio.sleep(_PROBE_S)
            self.lags[op].append(max(0.0, time.perf_counter() - t - _PROBE_S))


async def drive(name: str, turns: list[tuple[bool, SessionEvent]], window: int, probe: Probe) -> dict[str, Any]:
    """One session through an agent loop; ``turns``: (a model call comes before it, the event)."""
    with tempfile.TemporaryDirectory(prefix="aiden-stalls-") as root:
        async with aiden.open_memory(root, context_window=window) as memory, anyio.create_task_group() as tg:
            tg.start_soon(probe.run)
            probe.op = "idle"
            await anyio.sleep(0.5)
            for call, event in turns:
                if call:
                    probe.op = "build_messages"
                    built = await memory.build_messages()
                    probe.op = "record_usage"
                    await memory.record_usage(prompt_tokens=built.estimated_tokens, completion_tokens=60)
                probe.op = "append"
                await memory.append(event)
            probe.op = "dream"
            await memory.dream()
            probe.op = "checkpoint"
            await memory.checkpoint()
            probe.op = "idle"
            await anyio.sleep(0.5)
            probe.stop = True
            compactions = memory.stats().compactions
    return {"session": name, "events": len(turns), "compactions": compactions}


def swe_sessions(base: Path) -> list[tuple[str, list[tuple[bool, SessionEvent]]]]:
    from swe_sessions import load_sessions

    out = []
    for s in load_sessions(base):
        calls = set(s.calls)
        out.append((f"swe-agent {s.name}", [(i in calls, msgspec.structs.replace(e, seq=0)) for i, e in enumerate(s.events)]))
    return out


def locomo(base: Path, limit: int) -> list[tuple[str, list[tuple[bool, SessionEvent]]]]:
    from bench_warm_tier import Conversation

    out = []
    for path in sorted((base / "locomo").glob("*.json"))[:limit]:
        conv = Conversation(path)
        turns: list[tuple[bool, SessionEvent]] = []
        for kind, text in conv.turns:
            if kind == "date":
                turns.append((False, SessionEvent(type="system_event", role="system", content=text)))
            elif kind == "user":
                turns.append((False, SessionEvent(type="user_input", content=text)))
            else:
                turns.append((True, SessionEvent(type="assistant_output", role="assistant", content=text)))
        out.append((f"locomo {conv.name}", turns))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=int, default=8000, help="context window (tokens): small, so it compacts")
    parser.add_argument("--locomo", type=int, default=2, help="how many LoCoMo conversations")
    args = parser.parse_args()
    base = os.environ.get("AIDEN_REAL_DATA")
    if not base or not Path(base).is_dir():
        print("skipped: AIDEN_REAL_DATA is not set (see ../shared/data/README.md)")
        return
    sessions = swe_sessions(Path(base)) + locomo(Path(base), args.locomo)
    probe_all: dict[str, list[float]] = defaultdict(list)
    runs = []
    for name, turns in sessions:
        probe = Probe()
        runs.append(anyio.run(drive, name, turns, args.window, probe))
        worst = {op: round(1000 * max(v), 1) for op, v in probe.lags.items() if v}
        runs[-1]["worst_ms"] = worst
        print(f"{name}: {runs[-1]['events']} events, {runs[-1]['compactions']} compactions, worst stall ms {worst}", flush=True)
        for op, values in probe.lags.items():
            probe_all[op].extend(values)
    idle_p99 = latency_ms(probe_all["idle"])["p99"]
    rows, ops = [], {}
    for op in ("idle", "append", "build_messages", "record_usage", "dream", "checkpoint"):
        lat = latency_ms(probe_all[op]) if probe_all[op] else None
        if lat is None:
            continue
        ops[op] = lat
        rows.append([op, lat["samples"], f"{lat['p99']:.1f}", f"{lat['max']:.1f}", f"{lat['max'] / idle_p99:.0f}x"])
    text = table(["while", "probe wakes", "lateness p99 ms", "worst ms", "worst / idle p99"], rows)
    print(text)
    path = write_result(
        "loop_stalls",
        {"machine": machine(), "window": args.window, "sessions": runs, "by_operation_ms": ops, "table": text},
    )
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
