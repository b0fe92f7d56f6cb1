#!/usr/bin/env python
# ruff: noqa: E402  (imports follow the sys.path set-up)
"""Per-call context governance: prompt tokens per call and prompt-cache share, governance on vs off.

    python benchmarks/bench_governance.py [--quick]

1. **Replay.** A long tool-heavy generated session (``aiden.demo``) and,
   when ``AIDEN_REAL_DATA`` is set, the real SWE-agent sessions are replayed
   model call by model call (no compaction). Each call's prompt is built with
   :func:`aiden.context.prompt.build_messages` from the hot window as is (``off``) or
   after :func:`aiden.context.governance.trim_replay` / :func:`~aiden.context.governance.govern_events`,
   and sent to :class:`aiden.testing.FakeLLMServer`.
2. **Full stack.** The generated session through ``aiden.open_memory`` with a
   small context window, so compactions happen; the prompt size reported to
   the trigger is the governed one. Cached-token share before and after each
   compaction comes from :class:`aiden.testing.usage.CacheShareTelemetry`.

FakeLLMServer reports ``cached_tokens`` only when the responder sets it: it
does not model prefix caching. The responder here does: cached tokens are the
estimated tokens of the prefix the request shares with the previous request
of the same stream (:func:`aiden.testing.usage.shared_prefix_tokens`), an upper
bound of what a provider with block-granular caching would report.
"Uncached" tokens (prompt - cached) are the ones billed at the full rate.

Writes ``benchmarks/results/governance.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct, table, write_result

import aiden
from aiden.context.governance import govern_events, trim_replay
from aiden.context.prompt import PromptLayers, build_messages, validate_chat_sequence
from aiden.demo import DEMO_CONFIG, LAYERS, generate_scenario, turn_events
from aiden.events import SessionEvent
from aiden.testing import FakeLLMServer
from aiden.testing.usage import (
    CacheShareTelemetry,
    cached_share,
    messages_tokens,
    record_call,
    shared_prefix_tokens,
    usage_tokens,
)
from tests.governance.swe_sessions import load_sessions

Message = dict[str, Any]
Transform = Callable[[Sequence[SessionEvent]], Sequence[SessionEvent]]

KEEP_TURNS = 2
MAX_TOOL_TOKENS = 2000


def governed(keep_steps: int = 0, replay: int = 0) -> Transform:
    def transform(events: Sequence[SessionEvent]) -> Sequence[SessionEvent]:
        if replay:
            events = trim_replay(events, max_messages=replay)
        return govern_events(
            events, keep_turns=KEEP_TURNS, max_tool_tokens=MAX_TOOL_TOKENS, keep_steps=keep_steps
        ).events

    return transform


MODES: dict[str, Transform | None] = {
    "off": None,
    "turns": governed(),
    "turns, replay<=60": governed(replay=60),
    "steps=1": governed(keep_steps=1),
    "steps=2": governed(keep_steps=2),
    "steps=4": governed(keep_steps=4),
}
FULL_STACK_MODES = ("off", "turns", "steps=2")
FULL_STACK_CONFIGS: dict[str, aiden.Config] = {
    "8k window (DEMO_CONFIG)": msgspec.structs.replace(DEMO_CONFIG, durability="none"),
    "64k window": msgspec.structs.replace(
        DEMO_CONFIG, durability="none", context_window=64000, reserve_tokens=4000,
        keep_recent_tokens=16000, hot_window_events=60, count_compress_after_events=200,
    ),
}
CACHED_PRICE = 0.1
"""Price of a cached prompt token relative to an uncached one (Anthropic cache reads; OpenAI 0.1-0.5)."""


def cost_tokens(prompt: int, cached: int) -> float:
    """Uncached-equivalent tokens: uncached at full price, cached at CACHED_PRICE."""
    return prompt - cached + CACHED_PRICE * cached


# --- the fake provider -------------------------------------------------------------------------


class PrefixCacheResponder:
    """FakeLLMServer responder with a modelled prefix cache, one stream per request ``model``."""

    def __init__(self) -> None:
        self.previous: dict[str, list[Message]] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages: list[Message] = body["messages"]
        stream = str(body["model"])
        usage = {
            "prompt_tokens": messages_tokens(messages),
            "cached_tokens": shared_prefix_tokens(self.previous.get(stream, []), messages),
            "completion_tokens": 1,
        }
        self.previous[stream] = messages
        return {"content": "ok", "usage": usage}


def complete(base_url: str, stream: str, messages: list[Message]) -> tuple[int, int]:
    """POST one chat completion; returns (prompt_tokens, cached_tokens) from the reply's usage."""
    data = json.dumps({"model": stream, "messages": messages}).encode()
    request = urllib.request.Request(
        base_url + "/chat/completions", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        reply = json.loads(response.read())
    return usage_tokens(reply["usage"])


# --- sessions ----------------------------------------------------------------------------------


class Session(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    layers: PromptLayers
    events: tuple[SessionEvent, ...]
    calls: tuple[int, ...]
    """Prefix length seen by each model call."""


def scenario_session(seed: int, turns: int) -> Session:
    events: list[SessionEvent] = []
    calls: list[int] = []
    for turn in generate_scenario(seed=seed, turns=turns).turns:
        events.append(SessionEvent(type="user_input", role="user", content=turn.user))
        for event in turn_events(turn):
            if event.type == "tool_call":
                calls.append(len(events))
            events.append(event)
        calls.append(len(events))
        events.append(SessionEvent(type="assistant_output", role="assistant", content=turn.assistant))
    numbered = tuple(msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(events))
    return Session(name=f"scenario seed={seed} turns={turns}", layers=LAYERS, events=numbered, calls=tuple(calls))


def real_sessions() -> list[Session]:
    value = os.environ.get("AIDEN_REAL_DATA")
    if not value or not (Path(value) / "swe-agent").is_dir():
        print(f"(real sessions skipped: AIDEN_REAL_DATA={value!r} has no swe-agent/ folder)\n")
        return []
    return [
        Session(name=s.name, layers=PromptLayers(base_instruction=s.system), events=s.events, calls=s.calls)
        for s in load_sessions(Path(value))
    ]


# --- 1. replay ---------------------------------------------------------------------------------


def replay(session: Session, mode: str, transform: Transform | None, base_url: str) -> dict[str, Any]:
    prompts: list[int] = []
    cached: list[int] = []
    govern_us: list[float] = []
    for k in session.calls:
        hot: Sequence[SessionEvent] = session.events[:k]
        if transform is not None:
            t0 = time.perf_counter()
            hot = transform(hot)
            govern_us.append((time.perf_counter() - t0) * 1e6)
        messages = build_messages(layers=session.layers, hot_window=hot).messages
        assert validate_chat_sequence(messages) == [], (session.name, mode)
        p, c = complete(base_url, f"{session.name}|{mode}", messages)
        prompts.append(p)
        cached.append(c)
    total, total_cached = sum(prompts), sum(cached)
    return {
        "session": session.name,
        "mode": mode,
        "calls": len(prompts),
        "prompt_tokens_total": total,
        "prompt_tokens_mean": total / len(prompts),
        "prompt_tokens_max": max(prompts),
        "prompt_tokens_last": prompts[-1],
        "cached_tokens_total": total_cached,
        "cached_share": cached_share(total, total_cached),
        "uncached_tokens_total": total - total_cached,
        "cost_tokens_total": cost_tokens(total, total_cached),
        "govern_us_p50": pct(govern_us, 50) if govern_us else 0.0,
        "govern_us_max": max(govern_us) if govern_us else 0.0,
        "prompt_tokens": prompts,
        "cached_tokens": cached,
    }


# --- 2. full stack with compaction ----------------------------------------------------------


async def _prompt(memory: aiden.Memory, transform: Transform | None) -> list[Message]:
    # Mirrors aiden.lifecycle.Lifecycle.build_messages, with governance in the middle.
    hot: Sequence[SessionEvent] = await memory.hot_window()
    index = await memory.chunk_index()
    summary = await memory.summary_md()
    split_ctx, split_before = "", None
    if index.chunks and index.chunks[-1].split_turn_context:
        split_ctx = "Turn context (the start of this turn was compacted):\n" + index.chunks[-1].split_turn_context
        split_before = index.chunks[-1].last_seq + 1
    if transform is not None:
        hot = transform(hot)
    return build_messages(
        layers=LAYERS,
        hot_window=hot,
        session_summary=summary.strip(),
        split_turn_context=split_ctx,
        split_before_seq=split_before,
    ).messages


async def full_stack(
    turns: int, config_name: str, mode: str, transform: Transform | None, base_url: str
) -> dict[str, Any]:
    config = FULL_STACK_CONFIGS[config_name]
    scenario = generate_scenario(seed=7, turns=turns)
    telemetry = CacheShareTelemetry(window_calls=3)
    stream = f"full-stack|{config_name}|{mode}"
    with tempfile.TemporaryDirectory() as root:
        async with aiden.open_memory(root, config=config, context_window=config.context_window) as memory:
            for turn in scenario.turns:
                await memory.begin_run(turn.user, now=time.time())
                largest = 0
                events = list(turn_events(turn))
                for i in range(0, len(events) + 1, 2):
                    messages = await _prompt(memory, transform)
                    assert validate_chat_sequence(messages) == []
                    prompt, cached = await anyio.to_thread.run_sync(complete, base_url, stream, messages)
                    telemetry = record_call(
                        telemetry, prompt_tokens=prompt, cached_tokens=cached,
                        compactions=memory.stats().compactions,
                    )
                    largest = max(largest, prompt)
                    if i < len(events):
                        await memory.append_many(events[i : i + 2])
                await memory.commit_run(turn.assistant, prompt_tokens=largest)
                await memory.maintain()
            compactions = memory.stats().compactions
    records = telemetry.records
    return {
        "config": config_name,
        "mode": mode,
        "calls": telemetry.total.calls,
        "compactions": compactions,
        "prompt_tokens_total": telemetry.total.prompt_tokens,
        "cached_share": telemetry.total.share,
        "uncached_tokens_total": telemetry.total.prompt_tokens - telemetry.total.cached_tokens,
        "cost_tokens_total": cost_tokens(telemetry.total.prompt_tokens, telemetry.total.cached_tokens),
        "share_before_compaction": statistics.fmean(r.before.share for r in records) if records else None,
        "share_after_compaction": statistics.fmean(r.after.share for r in records) if records else None,
        "records": [msgspec.to_builtins(r) for r in records],
    }


# --- main ----------------------------------------------------------------------------------------


def run(quick: bool) -> dict[str, Any]:
    sessions = [scenario_session(7, 30 if quick else 80), *real_sessions()]
    responder = PrefixCacheResponder()
    with FakeLLMServer(responder=responder) as server:
        replays = [replay(s, mode, t, server.base_url) for s in sessions for mode, t in MODES.items()]
        stack = [
            anyio.run(full_stack, 20 if quick else 40, name, mode, MODES[mode], server.base_url)
            for name in FULL_STACK_CONFIGS
            for mode in FULL_STACK_MODES
        ]
    return {
        "quick": quick,
        "cached_price": CACHED_PRICE,
        "keep_turns": KEEP_TURNS,
        "max_tool_tokens": MAX_TOOL_TOKENS,
        "replay": replays,
        "full_stack": stack,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="shorter generated sessions")
    args = parser.parse_args()
    data = run(args.quick)
    path = write_result("governance", data)

    print(f"### Replay without compaction (keep_turns={KEEP_TURNS}, max_tool_tokens={MAX_TOOL_TOKENS})\n")
    rows = []
    for r in data["replay"]:
        off = next(x for x in data["replay"] if x["session"] == r["session"] and x["mode"] == "off")
        rows.append([
            r["session"], r["mode"], r["calls"], f"{r['prompt_tokens_total']:,}",
            _pct(1 - r["prompt_tokens_total"] / off["prompt_tokens_total"]),
            f"{round(r['prompt_tokens_mean']):,}", f"{r['prompt_tokens_last']:,}",
            _pct(r["cached_share"]), f"{r['uncached_tokens_total']:,}",
            f"{round(r['cost_tokens_total']):,}",
            _pct(1 - r["cost_tokens_total"] / off["cost_tokens_total"]),
            round(r["govern_us_p50"]),
        ])
    print(table(
        ["session", "mode", "calls", "prompt tok total", "saved", "mean/call", "last call",
         "cached share", "uncached tok", f"cost tok (cached x{CACHED_PRICE})", "cost saved", "govern p50 us"],
        rows,
    ))

    scen = [r for r in data["replay"] if r["session"].startswith("scenario")]
    n = scen[0]["calls"]
    picks = sorted({0, *range(n // 8, n, max(1, n // 8)), n - 1})
    print("\n### Prompt tokens per call, generated session\n")
    print(table(["call", *[r["mode"] for r in scen]], [[i + 1, *[f"{r['prompt_tokens'][i]:,}" for r in scen]] for i in picks]))

    print("\n### Full stack with compaction (generated session, governed size reported to the trigger)\n")
    print(table(
        ["config", "mode", "calls", "compactions", "prompt tok total", "cached share",
         "share before compaction", "share after compaction", "uncached tok", f"cost tok (cached x{CACHED_PRICE})"],
        [[r["config"], r["mode"], r["calls"], r["compactions"], f"{r['prompt_tokens_total']:,}",
          _pct(r["cached_share"]), _pct(r["share_before_compaction"]), _pct(r["share_after_compaction"]),
          f"{r['uncached_tokens_total']:,}", f"{round(r['cost_tokens_total']):,}"]
         for r in data["full_stack"]],
    ))
    print(f"\nwrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
