"""Peer comparison: aiden vs nanobot-ai (from PyPI) on the same workloads, in the same run.

nanobot is installed ONLY in a separate venv, ``benchmarks/results/peer-venv``
(gitignored), created on first use with ``python -m venv`` + ``pip install
nanobot-ai``. nanobot runs in a child process of that venv (this file with
``--nanobot-worker``); that mode imports nothing from aiden. The parent
generates the events once and hands the same events to both sides.

Workloads:

1. History appends, one event per call, at 1, 8 and 64 concurrent appenders
   (asyncio tasks). nanobot: ``MemoryStore.append_history(text)``, its
   append-only ``memory/history.jsonl`` journal (a synchronous call, made from
   the tasks as nanobot's own async code makes it). aiden: ``memory.append``
   with ``durability: fsync`` and ``durability: none``. Two event mixes:
   ``small`` (the 120-character event of bench_append) and ``scenario``
   (generated coding-agent turns, tool outputs of up to ~8 kB).
   Durability differs: nanobot opens, writes and closes the file per entry and
   never fsyncs (an acknowledged entry survives a process crash but not a
   power loss or kernel crash) - the same guarantee as aiden's
   ``durability: none``; aiden's ``durability: fsync`` is strictly stronger.
   nanobot also rewrites a small ``memory/.cursor`` file (truncate + write) on
   every append; on ext4 (default ``auto_da_alloc``) replacing a file's content
   by truncation starts writeback when it is closed, which makes that rewrite
   cost about as much as a small fsync on this disk. The same small-event runs
   are therefore repeated on tmpfs (``/dev/shm``, no disk at all) at 1 and 64
   appenders, nanobot vs aiden ``durability: none``, to show the CPU-bound
   comparison as well.
2. Per-turn transcript persistence: nanobot's real per-turn path is
   ``Session.messages.append`` for each message, then ``SessionManager.save``
   (which rewrites the whole session file, no fsync by default); aiden's is one
   ``append_many`` per turn.
3. Consolidation after 1k and 10k events of prior history: nanobot's
   ``Consolidator.compact_idle_session`` (reload the session, archive the new
   messages through the LLM, write the summary to history.jsonl, save the
   session) driven by a stub provider that answers instantly (no network);
   aiden's ``maintain(manual=True)`` with an instant scripted summarizer.
   Both consolidate the 160 events appended since the previous consolidation.

nanobot's source was read only to find these entry points; none of it is copied.

    python benchmarks/bench_peer.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import latency_ms, paired, rng, rotate, summarize, table, target, write_result

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
PEER_VENV = Path(os.environ.get("AIDEN_PEER_VENV") or HERE.parent / "results" / "peer-venv")
PEER_PYTHON = PEER_VENV / "bin" / "python"
PACKAGE = "nanobot-ai"
LEVELS = (1, 8, 64)


# =====================================================================================
# nanobot side (runs inside the peer venv; stdlib + nanobot only)
# =====================================================================================

def _event_text(e: dict[str, Any]) -> str:
    if e["type"] == "tool_call":
        return f"{e.get('tool_name')} {e.get('tool_args') or ''}"
    return str(e.get("content", ""))


def _nb_message(e: dict[str, Any]) -> dict[str, Any]:
    """A nanobot transcript message for one event."""
    t = e["type"]
    if t == "user_input":
        return {"role": "user", "content": e["content"]}
    if t == "tool_call":
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": e["tool_call_id"], "type": "function",
                            "function": {"name": e["tool_name"], "arguments": e.get("tool_args") or "{}"}}],
        }
    if t == "tool_result":
        return {"role": "tool", "tool_call_id": e["tool_call_id"], "name": e.get("tool_name") or "tool",
                "content": e["content"]}
    return {"role": "assistant", "content": e["content"]}


def _guard_network(blocked: list[str]) -> None:
    def hook(name: str, args: Any) -> None:
        if name in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
            blocked.append(f"{name} {args!r}"[:200])
            raise OSError(f"network blocked by the benchmark: {name}")

    sys.addaudithook(hook)


def _nb_stub_provider() -> Any:
    from nanobot.providers.base import LLMProvider, LLMResponse

    class StubProvider(LLMProvider):
        """Answers every chat call instantly with a short summary; no network."""

        calls = 0

        def __init__(self) -> None:
            super().__init__(provider_name="benchmark-stub")

        async def chat(self, messages: list[dict[str, Any]], tools: Any = None, model: Any = None,
                       max_tokens: int = 4096, temperature: float = 0.7, reasoning_effort: Any = None,
                       tool_choice: Any = None, **_: Any) -> Any:
            StubProvider.calls += 1
            return LLMResponse(content=f"summary of {len(messages)} messages", finish_reason="stop")

        def get_default_model(self) -> str:
            return "stub-model"

    return StubProvider()


def _nb_append_one(texts: list[str], level: int, seconds: float, workspace: Path) -> dict[str, Any]:
    from nanobot.agent.memory import MemoryStore

    store = MemoryStore(workspace)
    lat: list[float] = []

    async def go() -> float:
        i = 0

        async def appender(stop: float) -> None:
            nonlocal i
            while time.perf_counter() < stop:
                text = texts[i % len(texts)]
                i += 1
                t = time.perf_counter()
                store.append_history(text)
                lat.append(time.perf_counter() - t)
                await asyncio.sleep(0)

        t0 = time.perf_counter()
        await asyncio.gather(*(appender(t0 + seconds) for _ in range(level)))
        return time.perf_counter() - t0

    dt = asyncio.run(go())
    return {"events": len(lat), "seconds": dt, "eps": len(lat) / dt, "lat": lat,
            "bytes": store.history_file.stat().st_size}


def _nb_append(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    texts = {mix: [_event_text(e) for e in events] for mix, events in spec["mixes"].items()}
    out = []
    for n, r in enumerate(spec["runs"]):
        base = Path(tempfile.mkdtemp(prefix="nanobot-bench-", dir="/dev/shm")) if r["tmpfs"] else work
        try:
            out.append(_nb_append_one(texts[r["mix"]], r["appenders"], r["seconds"], base / f"ws{n}"))
        finally:
            if r["tmpfs"]:
                shutil.rmtree(base, ignore_errors=True)
    return {"runs": out}


def _nb_session(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    from nanobot.session.manager import SessionManager

    turns: list[list[dict[str, Any]]] = spec["turns"]
    mgr = SessionManager(work / "ws", sessions_root=work / "sessions")
    session = mgr.get_or_create("bench:1")
    n = 0
    lat: list[float] = []
    t0 = time.perf_counter()
    for turn in turns:
        t = time.perf_counter()
        for e in turn:
            session.messages.append(_nb_message(e))
        mgr.save(session)
        lat.append(time.perf_counter() - t)
        n += len(turn)
    dt = time.perf_counter() - t0
    return {"events": n, "turns": len(turns), "seconds": dt, "eps": n / dt, "lat": lat}


def _nb_consolidate(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    from nanobot.agent.memory import Consolidator, MemoryStore
    from nanobot.session.manager import SessionManager
    from nanobot.utils.llm_runtime import LLMRuntime

    history = spec["history"]
    new_turns: list[list[dict[str, Any]]] = spec["new_turns"]
    repeats = spec["repeats"]
    provider = _nb_stub_provider()
    runtime = LLMRuntime.capture(provider, "stub-model", context_window_tokens=200_000)
    store = MemoryStore(work / "ws")
    mgr = SessionManager(work / "ws", sessions_root=work / "sessions")

    def build_messages(*, history: list[dict[str, Any]], current_message: Any = None, **_: Any) -> list[Any]:
        msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, *history]
        if current_message:
            msgs.append({"role": "user", "content": str(current_message)})
        return msgs

    cons = Consolidator(store, mgr, build_messages, lambda: [])
    key = "bench:1"
    session = mgr.get_or_create(key)
    for e in history:
        session.messages.append(_nb_message(e))
    session.last_consolidated = len(session.messages)  # prior history already consolidated
    mgr.save(session)
    walls: list[float] = []
    cpus: list[float] = []
    for r in range(repeats):
        session = mgr.get_or_create(key)
        for e in new_turns[r]:
            session.messages.append(_nb_message(e))
        mgr.save(session)
        c = time.process_time()
        t = time.perf_counter()
        summary = asyncio.run(cons.compact_idle_session(key, runtime=runtime))
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        if not summary:
            raise RuntimeError(f"nanobot consolidation produced no summary: {summary!r}")
    return {"wall": walls, "cpu": cpus, "provider_calls": provider.calls,
            "history_messages": len(mgr.get_or_create(key).messages)}


def nanobot_worker(spec_path: str) -> None:
    blocked: list[str] = []
    _guard_network(blocked)
    try:
        from loguru import logger

        logger.remove()
    except ImportError:
        pass
    spec = json.loads(Path(spec_path).read_text())
    import importlib.metadata

    with tempfile.TemporaryDirectory(prefix="nanobot-bench-") as d:
        work = Path(d)
        os.environ["HOME"] = str(work / "home")
        (work / "home").mkdir()
        mode = spec["mode"]
        if mode == "append":
            out = _nb_append(spec, work)
        elif mode == "session":
            out = _nb_session(spec, work)
        elif mode == "consolidate":
            out = _nb_consolidate(spec, work)
        else:
            raise SystemExit(f"unknown mode {mode}")
    out["nanobot_version"] = importlib.metadata.version(PACKAGE)
    out["network_attempts"] = blocked
    print(json.dumps(out))


# =====================================================================================
# parent side
# =====================================================================================

def ensure_peer_venv() -> tuple[bool, str]:
    """Create the peer venv and install nanobot-ai into it if missing. (ok, why-not)."""
    if PEER_PYTHON.exists():
        check = subprocess.run([str(PEER_PYTHON), "-c", "import nanobot.agent.memory"], capture_output=True,
                               text=True, check=False)
        if check.returncode == 0:
            return True, ""
    try:
        if not PEER_PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True, capture_output=True, text=True)
        subprocess.run([str(PEER_PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check", PACKAGE],
                       check=True, capture_output=True, text=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        return False, f"installing {PACKAGE} into {PEER_VENV} failed: {(exc.stderr or exc.stdout or '')[-1500:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"creating {PEER_VENV} failed: {exc}"
    check = subprocess.run([str(PEER_PYTHON), "-c", "import nanobot.agent.memory"], capture_output=True, text=True,
                           check=False)
    if check.returncode != 0:
        return False, f"{PACKAGE} installed but cannot be imported: {check.stderr[-1500:]}"
    return True, ""


def _tiktoken_cache() -> str | None:
    """litellm ships tiktoken's BPE files; nanobot's token estimates use tiktoken (offline with this cache)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


def run_nanobot(spec: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    env = {**os.environ}
    cache = _tiktoken_cache()
    if cache:
        env["TIKTOKEN_CACHE_DIR"] = cache
    try:
        res = subprocess.run([str(PEER_PYTHON), str(HERE), "--nanobot-worker", path], capture_output=True, text=True,
                             check=False, timeout=timeout, env=env, cwd=tempfile.gettempdir())
    finally:
        os.unlink(path)
    if res.returncode != 0:
        raise RuntimeError(f"nanobot worker ({spec['mode']}) failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _events(mix: str, n_turns: int = 120) -> list[dict[str, Any]]:
    import msgspec

    from aiden import SessionEvent
    from aiden.demo import generate_scenario, turn_events

    if mix == "small":
        return [msgspec.to_builtins(SessionEvent(type="user_input", role="user", content="x" * 120))]
    out: list[dict[str, Any]] = []
    for t in generate_scenario(seed=5, turns=n_turns).turns:
        evs = [SessionEvent(type="user_input", role="user", content=t.user), *turn_events(t)]
        if evs[-1].type != "assistant_output":
            evs.append(SessionEvent(type="assistant_output", role="assistant", content=t.assistant))
        out.extend(msgspec.to_builtins(e) for e in evs)
    return out


def _aiden_event(e: dict[str, Any]) -> Any:
    import msgspec

    from aiden import SessionEvent

    return msgspec.convert(e, SessionEvent)


async def _aiden_append(events: list[dict[str, Any]], level: int, seconds: float, durability: str,
                        tmpfs: bool = False) -> dict[str, Any]:
    import anyio

    import aiden

    evs = [_aiden_event(e) for e in events]
    lat: list[float] = []
    i = 0
    with tempfile.TemporaryDirectory(prefix="aiden-bench-", dir="/dev/shm" if tmpfs else None) as d:
        config = aiden.Config(durability=durability, count_compress_after_events=10**9,  # type: ignore[arg-type]
                              session_summary_on_close=False)
        async with aiden.open_memory(d, config=config, context_window=10**9) as memory:

            async def appender(stop: float) -> None:
                nonlocal i
                while time.perf_counter() < stop:
                    ev = evs[i % len(evs)]
                    i += 1
                    t = time.perf_counter()
                    await memory.append(ev)
                    lat.append(time.perf_counter() - t)

            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(level):
                    tg.start_soon(appender, t0 + seconds)
            dt = time.perf_counter() - t0
    return {"events": len(lat), "seconds": dt, "eps": len(lat) / dt, "lat": lat}


async def _aiden_turns(turns: list[list[dict[str, Any]]], durability: str) -> dict[str, Any]:
    import aiden

    lat: list[float] = []
    n = 0
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        config = aiden.Config(durability=durability, count_compress_after_events=10**9,  # type: ignore[arg-type]
                              session_summary_on_close=False)
        async with aiden.open_memory(d, config=config, context_window=10**9) as memory:
            t0 = time.perf_counter()
            for turn in turns:
                evs = [_aiden_event(e) for e in turn]
                t = time.perf_counter()
                await memory.append_many(evs)
                lat.append(time.perf_counter() - t)
                n += len(evs)
            dt = time.perf_counter() - t0
    return {"events": n, "turns": len(turns), "seconds": dt, "eps": n / dt, "lat": lat}


def _aiden_consolidate(history_events: int, repeats: int) -> dict[str, list[float]]:
    """One maintain per repeat and storage mode (real fsync / no fsync), alternating, on one built history."""
    import anyio
    from bench_compaction import CFG, NoSyncStorage, build_history, turn

    import aiden
    from aiden.testing import ScriptedSummarizer

    out: dict[str, list[float]] = {"fsync_wall": [], "fsync_cpu": [], "nosync_wall": [], "nosync_cpu": []}
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        build_history(d, history_events)

        async def once(first: int, nosync: bool) -> None:
            storage = NoSyncStorage() if nosync else None
            async with aiden.open_memory(d, config=CFG, context_window=10**9, summarizer=ScriptedSummarizer(),
                                         storage=storage) as memory:
                for i in range(first, first + 40):
                    await memory.append_many(turn(i))
                c = time.process_time()
                t = time.perf_counter()
                res = await memory.maintain(manual=True)
                key = "nosync" if nosync else "fsync"
                out[f"{key}_wall"].append(time.perf_counter() - t)
                out[f"{key}_cpu"].append(time.process_time() - c)
                assert res.compacted, res

        first = 10**6
        for r in range(repeats):
            for nosync in rotate([False, True], r):
                anyio.run(once, first, nosync)
                first += 40
    return out


def _turn_dicts(first: int, n: int) -> list[list[dict[str, Any]]]:
    import msgspec
    from bench_compaction import turn

    return [[msgspec.to_builtins(e) for e in turn(i)] for i in range(first, first + n)]


def run(quick: bool, *, levels: tuple[int, ...] = LEVELS, seconds: float | None = None,
        repeats: int | None = None, histories: tuple[int, ...] | None = None) -> dict[str, Any]:
    import anyio

    sys.path.insert(0, str(ROOT))
    seconds = seconds or (0.5 if quick else 1.0)
    repeats = repeats or (2 if quick else 3)
    histories = histories or ((1000,) if quick else (1000, 10000))
    results: dict[str, Any] = {"targets": [], "peer": PACKAGE}
    ok, why = ensure_peer_venv()
    if not ok:
        results["error"] = why
        results["table"] = f"nanobot could not be installed or driven: {why}"
        return results

    # 1. appends: per repeat, one nanobot process runs every combination, and aiden runs
    # the same combinations; the order of the two alternates between repeats.
    mixes = {"small": _events("small"), "scenario": _events("scenario")}
    combos = [(mix, level, False) for mix in mixes for level in levels]
    combos += [("small", level, True) for level in (min(levels), max(levels))]
    aiden_systems = ("aiden_fsync", "aiden_none")
    eps: dict[tuple[str, int, bool], dict[str, list[float]]] = {
        c: {"nanobot": [], "aiden_fsync": [], "aiden_none": []} for c in combos
    }
    lat: dict[tuple[str, int, bool], dict[str, list[float]]] = {
        c: {"nanobot": [], "aiden_fsync": [], "aiden_none": []} for c in combos
    }
    for r in range(repeats):
        for side in rotate(["nanobot", "aiden"], r):
            if side == "nanobot":
                res = run_nanobot({"mode": "append", "mixes": mixes, "runs": [
                    {"mix": m, "appenders": lv, "seconds": seconds, "tmpfs": tm} for m, lv, tm in combos]})
                results["nanobot_version"] = res["nanobot_version"]
                if res["network_attempts"]:
                    results.setdefault("network_attempts", []).extend(res["network_attempts"])
                for c, one in zip(combos, res["runs"], strict=True):
                    eps[c]["nanobot"].append(one["eps"])
                    lat[c]["nanobot"].extend(one["lat"])
            else:
                for c in combos:
                    mix, level, tmpfs = c
                    for system in (("aiden_none",) if tmpfs else aiden_systems):
                        one = anyio.run(_aiden_append, mixes[mix], level, seconds, system.removeprefix("aiden_"),
                                        tmpfs)
                        eps[c][system].append(one["eps"])
                        lat[c][system].extend(one["lat"])
    appends: dict[str, Any] = {}
    rows = []
    for c in combos:
        mix, level, tmpfs = c
        e = eps[c]
        entry: dict[str, Any] = {
            "event_mix": mix,
            "tmpfs": tmpfs,
            "mean_event_bytes": sum(len(json.dumps(x)) for x in mixes[mix]) / len(mixes[mix]),
            "appenders": level,
            **{f"{k}_eps": summarize(v) for k, v in e.items() if v},
            **{f"{k}_latency_ms": latency_ms(v) for k, v in lat[c].items() if v},
            "ratio_aiden_none_vs_nanobot": paired(e["aiden_none"], e["nanobot"]),
        }
        if e["aiden_fsync"]:
            entry["ratio_aiden_fsync_vs_nanobot"] = paired(e["aiden_fsync"], e["nanobot"])
        appends[f"{mix}_{level}{'_tmpfs' if tmpfs else ''}"] = entry
        where = "tmpfs (/dev/shm)" if tmpfs else "disk"
        rows.append([
            f"{mix} ({entry['mean_event_bytes']:,.0f} B)", where, level,
            rng(entry["nanobot_eps"]),
            rng(entry["aiden_fsync_eps"]) if tmpfs is False else "-",
            rng(entry["ratio_aiden_fsync_vs_nanobot"], ".1f", suffix="x") if not tmpfs else "-",
            rng(entry["aiden_none_eps"]),
            rng(entry["ratio_aiden_none_vs_nanobot"], ".1f", suffix="x"),
            f"{entry['nanobot_latency_ms']['p50']:.2f} / {entry['nanobot_latency_ms']['p99']:.2f}",
            (f"{entry['aiden_fsync_latency_ms']['p50']:.2f} / {entry['aiden_fsync_latency_ms']['p99']:.2f}"
             if not tmpfs else "-"),
        ])
        if not tmpfs and level in (min(levels), max(levels)):
            rf = entry["ratio_aiden_fsync_vs_nanobot"]["median"]
            rn = entry["ratio_aiden_none_vs_nanobot"]["median"]
            best = max(rf, rn)
            results["targets"].append(target(
                f"peer appends ({mix} events, {level} appender{'s' if level > 1 else ''}): aiden / nanobot",
                ">= 5x at equal or better durability", best, best >= 5,
                f"fsync (stronger) {rf:.1f}x, none (equal) {rn:.1f}x",
            ))
    results["appends"] = appends
    results["table_appends"] = table(
        ["events", "storage", "appenders", "nanobot append_history ev/s", "aiden fsync ev/s",
         "aiden fsync / nanobot", "aiden none ev/s", "aiden none / nanobot", "nanobot p50 / p99 ms",
         "aiden fsync p50 / p99 ms"],
        rows,
    )

    # 2. per-turn persistence
    n_turns = 300 if quick else 800
    turns = _turn_dicts(0, n_turns)
    per_turn: dict[str, list[dict[str, Any]]] = {"nanobot": [], "aiden_fsync": [], "aiden_none": []}
    for r in range(repeats):
        for system in rotate(list(per_turn), r):
            if system == "nanobot":
                per_turn[system].append(run_nanobot({"mode": "session", "turns": turns}))
            else:
                per_turn[system].append(anyio.run(_aiden_turns, turns, system.removeprefix("aiden_")))
    pt = {k: {"eps": summarize([x["eps"] for x in v]),
              "first_100_turns_ms": summarize([1e3 * sum(x["lat"][:100]) / 100 for x in v]),
              "last_100_turns_ms": summarize([1e3 * sum(x["lat"][-100:]) / 100 for x in v])}
          for k, v in per_turn.items()}
    results["per_turn"] = {"turns": n_turns, "events": n_turns * 4, **pt}
    results["table_per_turn"] = table(
        ["system", f"ev/s over {n_turns:,} turns ({n_turns * 4:,} events)", "ms per turn, first 100 turns",
         "ms per turn, last 100 turns"],
        [[name, rng(v["eps"]), rng(v["first_100_turns_ms"], ".2f"), rng(v["last_100_turns_ms"], ".2f")]
         for name, v in (("nanobot Session + SessionManager.save", pt["nanobot"]),
                         ("aiden append_many, fsync", pt["aiden_fsync"]),
                         ("aiden append_many, none", pt["aiden_none"]))],
    )

    # 3. consolidation vs history
    cons: dict[str, Any] = {}
    crow = []
    creps = 3 if quick else 5
    for h in histories:
        hist = [e for t in _turn_dicts(0, h // 4) for e in t]
        new = [[e for t in _turn_dicts(10**6 + 40 * r, 40) for e in t] for r in range(creps)]
        nb = run_nanobot({"mode": "consolidate", "history": hist, "new_turns": new, "repeats": creps})
        ai = _aiden_consolidate(h, creps)
        cons[str(h)] = {
            "nanobot_wall_s": summarize(nb["wall"]),
            "nanobot_cpu_s": summarize(nb["cpu"]),
            "nanobot_provider_calls": nb["provider_calls"],
            "aiden_fsync_wall_s": summarize(ai["fsync_wall"]),
            "aiden_fsync_cpu_s": summarize(ai["fsync_cpu"]),
            "aiden_nosync_wall_s": summarize(ai["nosync_wall"]),
            "aiden_nosync_cpu_s": summarize(ai["nosync_cpu"]),
        }
        c = cons[str(h)]
        crow.append([f"{h:,}", rng(c["nanobot_wall_s"], ".1f", 1e3), rng(c["aiden_fsync_wall_s"], ".1f", 1e3),
                     rng(c["aiden_nosync_wall_s"], ".1f", 1e3), rng(c["nanobot_cpu_s"], ".1f", 1e3),
                     rng(c["aiden_fsync_cpu_s"], ".1f", 1e3)])
    results["consolidation"] = cons
    results["table_consolidation"] = table(
        ["prior history (events)", "nanobot compact_idle_session ms", "aiden maintain ms (fsync)",
         "aiden maintain ms (no fsync)", "nanobot CPU ms", "aiden CPU ms (fsync)"],
        crow,
    )
    results["table"] = "\n\n".join(
        [results["table_appends"], results["table_per_turn"], results["table_consolidation"]]
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter runs, fewer repeats, 1k history only")
    parser.add_argument("--nanobot-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nanobot_worker:
        nanobot_worker(args.nanobot_worker)
        return
    results = run(args.quick)
    path = write_result("peer", results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
