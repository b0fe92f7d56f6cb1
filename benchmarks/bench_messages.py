"""Message overhead: one msgspec-encoded actor hop vs a direct call, as a share of a durable append.

Measured on aiden's real message types and codecs (``aiden.messages.Codec``):
the request of one ``append`` (``AppendEvents`` carrying one event) and its
reply (``Appended`` with one ``Ack``).

- ``direct``: ``await handler(message)`` on the object (what an in-process
  call without an actor boundary costs);
- ``encode`` / ``decode``: the codec alone;
- ``stream``: an unencoded object sent through a bounded anyio memory stream
  to a receiving task and back (a round trip, so the per-hop figure is half);
- ``hop``: the full boundary, round trip: encode, send, the actor task
  receives and decodes, encodes the reply, sends it back, the caller receives
  and decodes. Per hop = round trip / 2.

The share is taken against the median latency of one durable append (one
appender, ``durability: fsync``) and one non-durable append
(``durability: none``), both measured through ``open_memory(...).append`` in
the same run. One ``append`` crosses two hops (request to the writer, reply
through the reply router).

``--prompt``: the per-call cost of ``Memory.build_messages`` with a full hot window
(45% of the window, just under where the trigger compacts, in events of ~700 words) at 128k and 1M windows: p50 of
a call after one new event, against a tiktoken o200k count of the same messages
in the same run (#35: the build costs O(new events), not O(hot window)).

    python benchmarks/bench_messages.py [--quick] [--prompt]
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

from _common import rng, summarize, table, write_result

import aiden
from aiden import Config, SessionEvent
from aiden.events import encode_event
from aiden.messages import Ack, Appended, AppendEvents, Codec, WriterInbox, WriterOutbox
from aiden.storage.protocol import PreparedEvent

EVENT = SessionEvent(type="user_input", role="user", content="x" * 120, timestamp=1.7e9)
# What Memory sends: the event encoded once on intake.
REQUEST = AppendEvents(1, 7, [PreparedEvent(encode_event(EVENT))])
REPLY = Appended(1, [Ack(7, [42])])


async def _direct(n: int) -> float:
    async def handler(msg: AppendEvents) -> Appended:
        return Appended(msg.session, [Ack(msg.request_id, [42])])

    t = time.perf_counter()
    for _ in range(n):
        await handler(REQUEST)
    return (time.perf_counter() - t) / n


def _encode(n: int) -> float:
    codec: Codec[WriterInbox] = Codec(WriterInbox)
    t = time.perf_counter()
    for _ in range(n):
        codec.encode(REQUEST)
    return (time.perf_counter() - t) / n


def _decode(n: int) -> float:
    codec: Codec[WriterInbox] = Codec(WriterInbox)
    raw = codec.encode(REQUEST)
    t = time.perf_counter()
    for _ in range(n):
        codec.decode(raw)
    return (time.perf_counter() - t) / n


async def _round_trip(n: int, encoded: bool) -> float:
    """Caller -> actor -> caller through two bounded memory streams (like aiden's inbox/outbox)."""
    req_send, req_recv = anyio.create_memory_object_stream[Any](64)
    rep_send, rep_recv = anyio.create_memory_object_stream[Any](64)
    inbox: Codec[WriterInbox] = Codec(WriterInbox)
    outbox: Codec[WriterOutbox] = Codec(WriterOutbox)

    async def actor() -> None:
        async with req_recv, rep_send:
            async for raw in req_recv:
                if encoded:
                    msg = inbox.decode(raw)
                    await rep_send.send(outbox.encode(Appended(msg.session, [Ack(msg.request_id, [42])])))
                else:
                    await rep_send.send(Appended(raw.session, [Ack(raw.request_id, [42])]))

    async with req_send, rep_recv, anyio.create_task_group() as tg:
        tg.start_soon(actor)
        t = time.perf_counter()
        for _ in range(n):
            if encoded:
                await req_send.send(inbox.encode(REQUEST))
                outbox.decode(await rep_recv.receive())
            else:
                await req_send.send(REQUEST)
                await rep_recv.receive()
        dt = (time.perf_counter() - t) / n
        await req_send.aclose()
    return dt


async def _append_latency(n: int, durability: str) -> float:
    lat: list[float] = []
    with tempfile.TemporaryDirectory(prefix="aiden-bench-") as d:
        config = Config(durability=durability, count_compress_after_events=10**9,  # type: ignore[arg-type]
                        session_summary_on_close=False)
        async with aiden.open_memory(d, config=config, context_window=10**9) as memory:
            for _ in range(n):
                t = time.perf_counter()
                await memory.append(EVENT)
                lat.append(time.perf_counter() - t)
    return statistics.median(lat)


def run(quick: bool, *, repeats: int | None = None, n: int | None = None, appends: int | None = None) -> dict[str, Any]:
    repeats = repeats or (3 if quick else 7)
    n = n or (5_000 if quick else 50_000)
    appends = appends or (100 if quick else 400)
    samples: dict[str, list[float]] = {k: [] for k in
                                       ("direct", "encode", "decode", "stream_rt", "hop_rt", "append_fsync",
                                        "append_none")}
    for _ in range(repeats):
        samples["direct"].append(anyio.run(_direct, n))
        samples["encode"].append(_encode(n))
        samples["decode"].append(_decode(n))
        samples["stream_rt"].append(anyio.run(_round_trip, n // 5, False))
        samples["hop_rt"].append(anyio.run(_round_trip, n // 5, True))
        samples["append_fsync"].append(anyio.run(_append_latency, appends, "fsync"))
        samples["append_none"].append(anyio.run(_append_latency, appends, "none"))
    s = {k: summarize([v * 1e6 for v in vals]) for k, vals in samples.items()}  # microseconds
    hop = s["hop_rt"]["median"] / 2
    direct = s["direct"]["median"]
    results: dict[str, Any] = {
        "us": s,
        "message_bytes": len(Codec(WriterInbox).encode(REQUEST)),
        "hop_us": hop,
        "hop_over_direct_us": hop - direct,
        "hop_vs_direct_x": hop / direct,
        "share_of_durable_append": 2 * hop / s["append_fsync"]["median"],
        "share_of_nondurable_append": 2 * hop / s["append_none"]["median"],
        "targets": [],
    }
    rows = [
        ["direct call (await handler(msg))", rng(s["direct"], ".2f"), ""],
        ["msgspec encode (AppendEvents, 1 event)", rng(s["encode"], ".2f"), f"{results['message_bytes']} bytes"],
        ["msgspec decode", rng(s["decode"], ".2f"), ""],
        ["memory-stream round trip, objects (2 hops)", rng(s["stream_rt"], ".1f"), "task switch both ways"],
        ["encoded round trip (2 hops: request + reply)", rng(s["hop_rt"], ".1f"), ""],
        ["one encoded hop (round trip / 2)", f"{hop:.1f}", f"{hop / direct:.0f}x a direct call"],
        ["durable append, 1 appender (fsync), p50", rng(s["append_fsync"], ",.0f"),
         f"2 hops = {results['share_of_durable_append'] * 100:.1f}% of it"],
        ["append with durability=none, 1 appender, p50", rng(s["append_none"], ",.0f"),
         f"2 hops = {results['share_of_nondurable_append'] * 100:.1f}% of it"],
    ]
    results["table"] = table(["operation", "us (median, min-max)", "note"], rows)
    return results


async def _prompt_cost(window: int, events: int, calls: int) -> tuple[float, float]:
    """(build_messages p50, o200k count p50) in seconds, each call after one new event."""
    from bench_agent_loop import _messages_tokens, _o200k

    count = _o200k()
    assert count is not None, "litellm's bundled o200k encoding is needed"
    words = ["alpha", "beta", "gamma", "delta", "queue", "worker", "parser", "cache"]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(context_window=window, durability="none", session_summary_on_close=False)
        async with aiden.open_memory(tmp, config=cfg) as memory:
            batch = [
                SessionEvent(
                    type="user_input" if i % 2 == 0 else "assistant_output",
                    content=" ".join(f"{words[(i * 7 + k) % 8]}{k}" for k in range(700)),
                )
                for i in range(events)
            ]
            for i in range(0, events, 100):
                await memory.append_many(batch[i : i + 100])
            await memory.build_messages()
            build: list[float] = []
            tokenize: list[float] = []
            prompts = []
            for r in range(calls):
                await memory.append(SessionEvent(type="user_input", content=f"next step {r}"))
                t = time.perf_counter()
                built = await memory.build_messages()
                build.append(time.perf_counter() - t)
                prompts.append(built.messages)
            # Counted after the builds: a count's garbage (hundreds of thousands of token ids at 1M)
            # would otherwise be collected inside the next build and charged to it.
            for messages in prompts:
                t = time.perf_counter()
                _messages_tokens(messages, count)
                tokenize.append(time.perf_counter() - t)
    return statistics.median(build), statistics.median(tokenize)


def run_prompt(quick: bool) -> dict[str, Any]:
    calls = 5 if quick else 40  # medians of sub-millisecond calls: 15 were noisy on a shared machine
    rows = []
    results: dict[str, Any] = {}
    # A full hot window: just under the 50% the trigger compacts at (events of ~1,460 estimated tokens).
    for window in (128_000, 1_000_000):
        events = window * 45 // 100 // 1500
        build, tokenize = anyio.run(_prompt_cost, window, events, calls)
        results[str(window)] = {"build_ms": build * 1e3, "o200k_ms": tokenize * 1e3, "ratio": build / tokenize}
        rows.append([f"{window:,}", events, f"{build * 1e3:.1f}", f"{tokenize * 1e3:.1f}", f"{build / tokenize:.2f}x"])
    results["ratio_1m_vs_128k"] = results["1000000"]["build_ms"] / results["128000"]["build_ms"]
    results["table"] = table(["window", "hot events", "build_messages p50 ms", "o200k count p50 ms", "build / count"],
                             rows) + f"\n\nbuild p50 at 1M / at 128k: {results['ratio_1m_vs_128k']:.2f}x"
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations and repeats")
    parser.add_argument("--prompt", action="store_true", help="the per-call cost of build_messages instead")
    args = parser.parse_args()
    if args.prompt:
        results = run_prompt(args.quick)
        print(results["table"])
        print(f"\nwritten {write_result('prompt_cost', results)}")
        return
    results = run(args.quick)
    path = write_result("messages", results)
    print(results["table"])
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
