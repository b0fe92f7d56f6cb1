"""Footprint: peak memory over a long session, and the cost of ``import aiden``.

1. Peak RSS replaying a long session with compaction on. Each size runs in a
   fresh subprocess (``--child-replay``): open a memory with the default
   configuration (embedded extractive summarizer, token trigger at 50% of a
   128k-token window) and replay runs of a coding agent through the public
   API as an agent loop does: ``append`` the user input, ``append_many`` each
   tool call with its result, ``append`` the answer, then what ``commit_run``
   does: ``record_usage(prompt_tokens=..., run_ended=True)`` and
   ``request_maintenance()`` (no wait), so compaction runs in the background.
   The reported prompt size is what a provider would report: the tokens kept
   by the latest compaction plus everything appended since (~4 chars a token).
   Runs of ~18 events are built from a fixed pool of turns generated once by
   ``aiden.demo`` (the pool stays in memory at a constant size).
   ``begin_run`` is not used: it reads the whole hot window on every call
   (see BENCHMARKS.md); boundary detection is not what this measures.
   Peak RSS is ``ru_maxrss`` at the end; RSS is also sampled during the replay
   (psutil when installed) to show whether it is flat. ``durability: none``
   (appends are not fsynced; compaction commits still are).
   Target: <= 150 MB, and flat as the session grows. Default sizes are 100k
   and 200k events; the issue's 1M takes ~15 min alone at the rate this
   replay sustains here, so it is run separately:
   ``--sizes 100000,1000000 --out footprint_1m``.
   A short extra replay reports no prompt tokens at all (callers without
   provider usage rely on the count trigger) and shows how many compactions
   still happen.
2. ``import aiden`` wall time vs ``python -c pass`` (fresh interpreters,
   interleaved, medians; target <= 120 ms more than the bare interpreter), and
   in a child with a ``sys.addaudithook`` hook recording every ``socket.*``
   audit event: litellm must not be imported and no socket may be touched by
   ``import aiden`` nor by opening a memory, appending, compacting and recalling.

    python benchmarks/bench_footprint.py [--quick] [--sizes 100000,1000000 --out footprint_1m]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import rng, summarize, table, target, write_result

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
RSS_TARGET_MB = 150.0
IMPORT_TARGET_MS = 120.0
CONTEXT_WINDOW = 128_000  # a gpt-4o-class model: compaction fires at 64k prompt tokens
SYSTEM_TOKENS = 2_000
# Default sizes. 1M events is the size, but at the ~1,100 events/s this replay
# sustains here (compaction-bound) it alone takes ~15 min: run it with --sizes.
FULL_SIZES = (100_000, 200_000)
QUICK_SIZES = (20_000, 60_000)
STEPS_PER_RUN = 4  # scenario turns folded into one run: ~18 events (user, ~8 tool calls + results, answer)


def _rss_mb() -> float:
    try:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20
    except ImportError:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# --- child: one replay -------------------------------------------------------------

def child_replay(events: int, durability: str, report_usage: bool = True, samples: int = 20) -> dict[str, Any]:
    import anyio

    import aiden
    from aiden.demo import generate_scenario

    rss_import = _rss_mb()
    pool = generate_scenario(seed=11, turns=200, noise=0.25).turns
    rss_pool = _rss_mb()

    async def go(root: str) -> dict[str, Any]:
        config = aiden.Config(durability=durability)  # type: ignore[arg-type]
        trajectory: list[tuple[int, float]] = []
        t0 = time.perf_counter()
        async with aiden.open_memory(root, config=config, context_window=CONTEXT_WINDOW) as memory:
            rss_open = _rss_mb()
            done = 0
            run_no = 0
            k = 0
            step = max(1, events // samples)
            next_sample = step
            bytes_in = 0
            max_prompt = 0
            # The "provider" reports each run's prompt size as an agent's would: what was
            # kept after the latest compaction plus what was appended since (~4 chars a token).
            prompt = SYSTEM_TOKENS
            seen_compactions = 0
            seen_after = 0
            while done < events:
                first = pool[k % len(pool)]
                await memory.append(
                    aiden.SessionEvent(type="user_input", role="user", content=f"[{run_no}] {first.user}")
                )
                done += 1
                run_chars = len(first.user)
                for _ in range(STEPS_PER_RUN):
                    t = pool[k % len(pool)]
                    k += 1
                    for tool in t.tools:
                        cid = f"{tool.call_id}_{run_no}"
                        pair = [
                            aiden.SessionEvent(type="tool_call", role="assistant", tool_name=tool.name,
                                               tool_call_id=cid, tool_args=tool.args),
                            aiden.SessionEvent(type="tool_result", role="tool", tool_name=tool.name,
                                               tool_call_id=cid, content=tool.result),
                        ]
                        await memory.append_many(pair)
                        done += 2
                        run_chars += len(tool.args) + len(tool.result)
                await memory.append(aiden.SessionEvent(type="assistant_output", role="assistant", content=t.assistant))
                done += 1
                run_chars += len(t.assistant)
                bytes_in += run_chars
                st = memory.stats()
                if st.compactions != seen_compactions:
                    kept = (st.tokens_after - seen_after) / (st.compactions - seen_compactions)
                    prompt = SYSTEM_TOKENS + int(kept)
                    seen_compactions, seen_after = st.compactions, st.tokens_after
                prompt += run_chars // 4
                max_prompt = max(max_prompt, prompt)
                # What commit_run does after appending the answer: report usage, request maintenance.
                await memory.record_usage(prompt_tokens=prompt if report_usage else None, run_ended=True)
                memory.request_maintenance()
                run_no += 1
                if done >= next_sample:
                    trajectory.append((done, _rss_mb()))
                    next_sample += step
            await memory.flush()
            stats = memory.stats()
            hot = len(await memory.hot_window())
        seconds = time.perf_counter() - t0
        return {
            "events": done,
            "runs": run_no,
            "report_usage": report_usage,
            "seconds": seconds,
            "events_per_s": done / seconds,
            "content_mb": bytes_in / 2**20,
            "rss_import_mb": rss_import,
            "rss_after_pool_mb": rss_pool,
            "rss_after_open_mb": rss_open,
            "trajectory": trajectory,
            "compactions": stats.compactions,
            "passes": stats.passes,
            "coalesced_requests": stats.coalesced_requests,
            "hot_window_events_at_end": hot,
            "max_prompt_tokens": max_prompt,
        }

    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        out = anyio.run(go, d)
        du = subprocess.run(["du", "-sm", d], capture_output=True, text=True, check=False).stdout.split()
        out["disk_mb"] = float(du[0]) if du else float("nan")
    out["rss_end_mb"] = _rss_mb()
    out["peak_rss_mb"] = _peak_mb()
    return out


# --- child: import audit ------------------------------------------------------------

_AUDIT_CHILD = r"""
import json, sys, time
import socket as _socket
events = []
def hook(name, args):
    # asyncio's event loop makes an AF_UNIX socketpair for its self-pipe: local, not network.
    if name == "socket.__new__" and len(args) > 1 and args[1] == _socket.AF_UNIX:
        return
    if name.startswith("socket.") or name in ("http.client.connect", "urllib.Request"):
        events.append([name, repr(args)[:200]])
sys.addaudithook(hook)
t = time.perf_counter()
import aiden
import_s = time.perf_counter() - t
after_import = {"litellm": "litellm" in sys.modules, "tiktoken": "tiktoken" in sys.modules,
                "modules": len(sys.modules), "socket_events": list(events)}
import tempfile, anyio
async def go(root):
    async with aiden.open_memory(root, model="gpt-4o") as m:
        for i in range(80):
            await m.append(aiden.SessionEvent(type="user_input", role="user", content=f"step {i} of the task"))
        out = await m.maintain(manual=True)
        await m.recall_session_chunks("task")
        return out.compacted
with tempfile.TemporaryDirectory() as d:
    compacted = anyio.run(go, d)
print(json.dumps({"import_s": import_s, "after_import": after_import, "compacted": compacted,
                  "litellm_after_use": "litellm" in sys.modules, "socket_events_total": events}))
"""


def _time_python(code: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=str(ROOT))
    return time.perf_counter() - t


def import_cost(repeats: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    # Warm the page cache and bytecode caches once: we measure a warm start.
    _time_python("import aiden", env)
    bare: list[float] = []
    imp: list[float] = []
    for r in range(repeats):
        pair = [("pass", bare), ("import aiden", imp)]
        for code, sink in pair if r % 2 == 0 else reversed(pair):
            sink.append(_time_python(code, env))
    delta = [a - b for a, b in zip(imp, bare, strict=True)]
    audit = subprocess.run(
        [sys.executable, "-c", _AUDIT_CHILD], env=env, capture_output=True, text=True, check=False, cwd=str(ROOT)
    )
    try:
        report = json.loads(audit.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        report = {"error": audit.stderr[-2000:]}
    top = _importtime_top(env)
    return {
        "python_pass_s": summarize(bare),
        "python_import_aiden_s": summarize(imp),
        "import_cost_s": summarize(delta),
        "audit": report,
        "slowest_imports": top,
    }


def _importtime_top(env: dict[str, str], n: int = 8) -> list[tuple[str, float]]:
    """The slowest top-level-ish imports of ``import aiden`` by cumulative time (-X importtime)."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import aiden"], env=env, capture_output=True, text=True,
        check=False, cwd=str(ROOT),
    )
    rows: list[tuple[str, float]] = []
    for line in res.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2][1:]  # one space, then two more per nesting level
        if (len(name) - len(name.lstrip())) // 2 <= 1:
            rows.append((name.strip(), int(parts[1]) / 1e3))
    rows.sort(key=lambda x: -x[1])
    return rows[:n]


# --- parent ---------------------------------------------------------------------------

def replay(events: int, durability: str, usage: bool = True, timeout: float = 3600) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, str(HERE), "--child-replay", str(events), "--durability", durability,
         *([] if usage else ["--no-usage"])],
        capture_output=True, text=True, check=False, timeout=timeout, cwd=str(ROOT),
    )
    if res.returncode != 0:
        raise RuntimeError(f"replay of {events} events failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def run(
    quick: bool,
    *,
    sizes: tuple[int, ...] | None = None,
    import_repeats: int | None = None,
    durability: str = "none",
    no_usage_events: int | None = None,
) -> dict[str, Any]:
    sizes = sizes or (QUICK_SIZES if quick else FULL_SIZES)
    import_repeats = import_repeats or (5 if quick else 15)
    no_usage_events = no_usage_events if no_usage_events is not None else (1_000 if quick else 5_000)
    results: dict[str, Any] = {"replay": {}, "targets": [], "durability": durability,
                               "context_window": CONTEXT_WINDOW}
    for n in sizes:
        results["replay"][str(n)] = replay(n, durability)
    if no_usage_events:
        results["replay_without_usage"] = replay(no_usage_events, durability, usage=False)
    imp = import_cost(import_repeats)
    results["import"] = imp

    rows = []
    peaks = []
    for n in sizes:
        r = results["replay"][str(n)]
        traj = r["trajectory"]
        half = [v for e, v in traj if e >= r["events"] / 2]
        growth = (max(half) - min(half)) if half else float("nan")
        r["rss_growth_second_half_mb"] = growth
        peaks.append(r["peak_rss_mb"])
        rows.append(
            [
                f"{r['events']:,}",
                f"{r['peak_rss_mb']:.0f}",
                f"{r['rss_after_open_mb']:.0f}",
                f"{r['rss_end_mb']:.0f}",
                f"{growth:+.1f}",
                f"{r['compactions']:,}",
                f"{r['events_per_s']:,.0f}",
                f"{r['seconds']:.0f}",
                f"{r['content_mb']:,.0f} / {r['disk_mb']:,.0f}",
                f"{r['hot_window_events_at_end']:,}",
            ]
        )
    nu = results.get("replay_without_usage")
    if nu:
        rows.append(
            [
                f"{nu['events']:,} (no prompt tokens reported)",
                f"{nu['peak_rss_mb']:.0f}",
                f"{nu['rss_after_open_mb']:.0f}",
                f"{nu['rss_end_mb']:.0f}",
                "",
                f"{nu['compactions']:,}",
                f"{nu['events_per_s']:,.0f}",
                f"{nu['seconds']:.0f}",
                f"{nu['content_mb']:,.0f} / {nu['disk_mb']:,.0f}",
                f"{nu['hot_window_events_at_end']:,}",
            ]
        )
    big, small = results["replay"][str(max(sizes))], results["replay"][str(min(sizes))]
    flat = big["peak_rss_mb"] / small["peak_rss_mb"]
    results["peak_ratio_largest_vs_smallest"] = flat
    worst = max(peaks)
    results["targets"].append(
        target(f"peak RSS replaying {max(sizes):,} events", f"<= {RSS_TARGET_MB:.0f} MB", worst,
               worst <= RSS_TARGET_MB, f"{worst:.0f} MB")
    )
    results["targets"].append(
        target(f"peak RSS flat ({max(sizes):,} vs {min(sizes):,} events)", "flat (<= 1.1x)", flat, flat <= 1.1,
               f"{flat:.2f}x")
    )
    cost_ms = imp["import_cost_s"]["median"] * 1e3
    audit = imp["audit"]
    after = audit.get("after_import", {})
    clean = (
        not after.get("litellm", True)
        and not after.get("socket_events", ["?"])
        and not audit.get("litellm_after_use", True)
        and not audit.get("socket_events_total", ["?"])
    )
    results["targets"].append(
        target("import aiden (over python -c pass)", f"<= {IMPORT_TARGET_MS:.0f} ms", cost_ms,
               cost_ms <= IMPORT_TARGET_MS, rng(imp["import_cost_s"], ".0f", 1e3, " ms"))
    )
    results["targets"].append(
        target("import/open/append/compact: litellm not imported, no socket touched", "none", 0.0 if clean else 1.0,
               clean, "clean" if clean else json.dumps(audit)[:300])
    )
    results["table_replay"] = table(
        ["events replayed", "peak RSS MB", "RSS after open MB", "RSS at end MB", "RSS change, 2nd half MB",
         "compactions", "events/s", "seconds", "content / on disk MB", "hot window at end (events)"],
        rows,
    )
    results["table_import"] = table(
        ["measure", "value"],
        [
            ["python -c pass", rng(imp["python_pass_s"], ".0f", 1e3, " ms")],
            ["python -c 'import aiden'", rng(imp["python_import_aiden_s"], ".0f", 1e3, " ms")],
            ["import aiden cost (paired difference)", rng(imp["import_cost_s"], ".0f", 1e3, " ms")],
            ["modules loaded by import aiden", str(after.get("modules", "?"))],
            ["litellm imported (import / after open+append+compact+recall)",
             f"{after.get('litellm')} / {audit.get('litellm_after_use')}"],
            ["network socket audit events (import / whole child; asyncio's AF_UNIX self-pipe excluded)",
             f"{len(after.get('socket_events', []))} / {len(audit.get('socket_events_total', []))}"],
            ["slowest imports (cumulative ms)",
             ", ".join(f"{name} {ms:.0f}" for name, ms in imp["slowest_imports"][:5])],
        ],
    )
    results["table"] = results["table_replay"] + "\n\n" + results["table_import"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20k and 60k events, fewer import repeats")
    parser.add_argument("--sizes", default="", help="comma-separated replay sizes (default 100000,200000)")
    parser.add_argument("--out", default="footprint", help="result name: results/<out>.json (default footprint)")
    parser.add_argument("--child-replay", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--durability", default="none", choices=["none", "fsync"])
    parser.add_argument("--no-usage", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_replay:
        print(json.dumps(child_replay(args.child_replay, args.durability, report_usage=not args.no_usage)))
        return
    sizes = tuple(int(x) for x in args.sizes.split(",") if x) or None
    results = run(args.quick, sizes=sizes, durability=args.durability)
    path = write_result(args.out, results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
