"""A backlog of N uncompacted events drained by the memory itself while an agent keeps appending.

[Reliability] finding 2: a long uncompacted backlog (a crash loop, a
summarizer that was down, an import) must drain without a human, in about
linear time, and never stall the appends of the agent that keeps working
meanwhile. For N = 1k, 4k, 16k, 64k (``--quick``: 1k, 4k):

1. *fill*: append N agent-loop events (``bench_backlog.backlog``) to a fresh
   root with no trigger able to fire (a huge context window) and no fsync;
2. *idle baseline*: reopen the root with the measured configuration and time
   ``IDLE_APPENDS`` appends of the probe appender before anything compacts is
   impossible (the pass starts on the first append), so the baseline is taken
   on a separate, empty root with the same configuration, same run;
3. *drain*: reopen the backlog root with an ordinary configuration (32k
   window, fsync) and the summarizer under test, and run a probe appender
   (one event every 10 ms, the agent still working) plus a loop-lag probe
   (a 5 ms sleep, overshoot measured). Nobody calls ``maintain``: the
   appends fire the triggers. Drained = the last pass left a hot window whose
   estimated tokens are under the trigger threshold. Reported: seconds to drain, passes and
   chunks, ms per backlog event, append latency p50/p99/max during the drain
   and as a ratio to the idle baseline, the event loop's worst stall.

Both summarizers: the embedded extractive one, and the LiteLLM one against
the local fake OpenAI-compatible server (a fixed short summary per call, so
what is timed is aiden's side: requests built, parsed, committed). The fake
server runs in a process of its own, as a provider does: in a thread of the
measured process its request parsing held the GIL the measured appends wait on.

    python benchmarks/bench_backlog_drain.py [--quick] [--sizes 1000,4000] [--summarizers extractive,llm]

Results: ``benchmarks/results/backlog_drain.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _drain_trace
from _common import RESULTS, latency_ms, machine
from bench_backlog import backlog

import aiden
from aiden import Config, SessionEvent
from aiden.policy.triggers import trigger_threshold_tokens

PROBE_INTERVAL_S = 0.010
LAG_INTERVAL_S = 0.005
IDLE_APPENDS = 300
DRAIN_TIMEOUT_S = 1800.0
_SUMMARY = (
    "Goal: keep the billing export steps running.\nDecisions:\n- run each step of PROJ tickets in order\n"
    "Errors:\n- ValueError: bad row in invoice export\nOpen: continue with the next step."
)


def run_config() -> Config:
    """The configuration the drain runs with: an ordinary window, fsynced appends."""
    return Config(context_window=32_000, durability="fsync", experience=False, session_summary_on_close=False)


def fill_config() -> Config:
    """A configuration under which no trigger fires (the backlog stays uncompacted)."""
    return Config(
        context_window=10**9,
        durability="none",
        count_compress_after_events=10**9,
        hot_window_events=10**9,
        experience=False,
        session_summary_on_close=False,
        idle_compact_after_minutes=0.0,
        idle_gap_compact_minutes=0.0,
    )


def _probe(i: int) -> SessionEvent:
    return SessionEvent(type="assistant_output", role="assistant", content=f"probe {i}: still working on it")


async def fill(root: Path, n: int) -> None:
    """Append the ``n`` backlog events through the public API, in batches."""
    events = [msgspec.structs.replace(e, seq=0) for e in backlog(n)]
    async with aiden.open_memory(root, config=fill_config()) as memory:
        for start in range(0, n, 1000):
            await memory.append_many(events[start : start + 1000])


class LLMServerProcess:
    """:class:`aiden.testing.FakeLLMServer` answering ``_SUMMARY``, in a child process (a line protocol on its pipes)."""

    _CHILD = (
        "import sys\n"
        "from aiden.testing import FakeLLMServer\n"
        "with FakeLLMServer(responder=lambda body: sys.argv[1]) as server:\n"
        "    print(server.base_url, flush=True)\n"
        "    for line in sys.stdin:\n"
        "        print(len(server.requests), flush=True)\n"
    )

    def __enter__(self) -> LLMServerProcess:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", self._CHILD, _SUMMARY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.base_url = self._proc.stdout.readline().strip()
        return self

    def requests(self) -> int:
        """How many requests the server has answered."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("count\n")
        self._proc.stdin.flush()
        return int(self._proc.stdout.readline())

    def __exit__(self, *exc: object) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=10)
        self._proc.stdout.close()


def _summarizer(kind: str, config: Config, server: LLMServerProcess) -> Any:
    if kind == "extractive":
        return None  # the embedded default
    return aiden.LiteLLMSummarizer(
        "openai/test-model", config=config, api_base=server.base_url, api_key="sk-test"
    )


async def idle_baseline(root: Path, kind: str, server: LLMServerProcess) -> list[float]:
    """Append latencies of the probe appender on an empty root (nothing to compact): the same-run baseline."""
    config = run_config()
    samples: list[float] = []
    async with aiden.open_memory(root, config=config, summarizer=_summarizer(kind, config, server)) as memory:
        for i in range(IDLE_APPENDS):
            t0 = time.perf_counter()
            await memory.append(_probe(i))
            samples.append(time.perf_counter() - t0)
            await anyio.sleep(PROBE_INTERVAL_S)
    return samples


async def drain(
    root: Path, n: int, kind: str, server: LLMServerProcess, trace: bool = False
) -> dict[str, Any]:
    """Reopen the backlog root and let the memory drain it while the probe appends."""
    config = run_config()
    threshold = trigger_threshold_tokens(config.context_window, config)
    appends: list[float] = []
    timeline: list[tuple[float, float]] = []
    lag = [0.0]
    drained_at: list[float] = []
    calls_before = server.requests()
    started = time.perf_counter()
    async with aiden.open_memory(root, config=config, summarizer=_summarizer(kind, config, server)) as memory:
        opened = time.perf_counter() - started
        done = anyio.Event()

        async def probe() -> None:
            i = 0
            while not done.is_set():
                t0 = time.perf_counter()
                await memory.append(_probe(i))
                t1 = time.perf_counter()
                appends.append(t1 - t0)
                timeline.append((t0, t1))
                i += 1
                await anyio.sleep(PROBE_INTERVAL_S)

        async def lag_probe() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                await anyio.sleep(LAG_INTERVAL_S)
                lag[0] = max(lag[0], time.perf_counter() - t0 - LAG_INTERVAL_S)

        async def watch() -> None:
            # Drained: the last pass left a hot window under the trigger threshold (its own
            # estimate, the scheduler's published counters). Free to read, on the loop: the
            # earlier watcher re-read the whole hot window from disk after every trim, in a
            # thread of the measured process, and held the GIL while the appends it measured waited.
            while True:
                await anyio.sleep(0.05)
                stats = memory.stats()
                if stats.compactions and (stats.last_prompt_tokens or 0) < threshold:
                    drained_at.append(time.perf_counter() - started)
                    done.set()
                    return

        with anyio.move_on_after(DRAIN_TIMEOUT_S), _drain_trace.stack_sampler() if trace else nullcontext():
            async with anyio.create_task_group() as tg:
                tg.start_soon(probe)
                tg.start_soon(lag_probe)
                tg.start_soon(watch)
                if trace:
                    tg.start_soon(_drain_trace.lag_sampler, done)
        done.set()
        if trace:
            print(f"--- trace {kind} {n}", _drain_trace.report(timeline), flush=True)
            _drain_trace.spans.clear()
            _drain_trace.lag.clear()
            _drain_trace.stacks.clear()
        stats = memory.stats()
    return {
        "n": n,
        "summarizer": kind,
        "drained": bool(drained_at),
        "drain_s": round(drained_at[0], 2) if drained_at else None,
        "open_s": round(opened, 3),
        "ms_per_event": round(drained_at[0] * 1000 / n, 3) if drained_at else None,
        "passes": stats.passes,
        "chunks": stats.chunks,
        "compactions": stats.compactions,
        "degraded_chunks": stats.degraded_chunks,
        "fallbacks": stats.fallbacks,
        "llm_calls": server.requests() - calls_before,
        "appends_during": len(appends),
        "append_ms": {k: round(v, 2) for k, v in latency_ms(appends).items()},
        "loop_stall_max_ms": round(lag[0] * 1000, 2),
    }


async def main_async(sizes: list[int], kinds: list[str], trace: bool = False) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with LLMServerProcess() as server, tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            idle = latency_ms(await idle_baseline(Path(tmp) / f"idle-{kind}", kind, server))
            for n in sizes:
                root = Path(tmp) / f"{kind}-{n}"
                await fill(root, n)
                row = await drain(root, n, kind, server, trace)
                row["idle_append_ms"] = {k: round(v, 2) for k, v in idle.items()}
                row["append_p99_vs_idle"] = round(row["append_ms"]["p99"] / idle["p99"], 2)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return {"machine": machine(), "rows": rows}


def table(result: dict[str, Any]) -> str:
    """The markdown table of BENCHMARKS.md."""
    lines = [
        "| summarizer | N | drained | s | ms/event | passes | chunks | append p50 / p99 / max ms"
        " | idle p99 ms | p99 vs idle | loop stall max ms |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in result["rows"]:
        a = r["append_ms"]
        lines.append(
            f"| {r['summarizer']} | {r['n']:,} | {'yes' if r['drained'] else 'NO'} | {r['drain_s']} |"
            f" {r['ms_per_event']} | {r['passes']} | {r['chunks']} | {a['p50']} / {a['p99']} / {a['max']} |"
            f" {r['idle_append_ms']['p99']} | {r['append_p99_vs_idle']} | {r['loop_stall_max_ms']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="N = 1k, 4k only")
    parser.add_argument("--sizes", help="comma-separated backlog sizes (overrides --quick)")
    parser.add_argument("--summarizers", default="extractive,llm")
    parser.add_argument("--trace", action="store_true", help="print where the slowest appends' time went")
    args = parser.parse_args()
    if args.trace:
        _drain_trace.install()
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([1_000, 4_000] if args.quick else [1_000, 4_000, 16_000, 64_000])
    )
    result = anyio.run(main_async, sizes, args.summarizers.split(","), args.trace)
    if not args.trace:  # traced figures are perturbed by the tracing: never the reported ones
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "backlog_drain.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
