#!/usr/bin/env python
# ruff: noqa: E402  (imports follow the sys.path set-up)
"""Hybrid recall's embedding: done in the maintenance pass, batched by length; the first recall after a compaction.

    python benchmarks/bench_recall_embedding.py [--conversations N]

Real conversations: the LoCoMo files of ``$AIDEN_REAL_DATA/locomo`` (skipped, saying why, when
absent), each turn one event (``Speaker: text``, the shared photo's caption appended, the session
date as its time), replayed into ``aiden.open_memory`` with ``LocalMiniLMEmbedder`` (numpy
all-MiniLM-L6-v2; skipped when not installed). Everything is measured in the same run.

1. **First recall after each compaction.** Whenever the appends since the last compaction reach a
   quarter of the window, ``maintain(manual=True)`` compacts (its pass indexes the new chunk and
   embeds its events), then one question of the conversation goes through
   ``handle_recall_tool``, timed. The same replay without an embedder is the baseline. Reported:
   p50 / p99 / max of that recall, and of the ``maintain`` call (where the embedding now is).
2. **Embedding throughput by batching order.** The docs of the hybrid replay's recall database
   (events and chunk summaries, as indexed) embedded again three ways: *before* (what main did:
   every doc, summaries included, in doc id order, 64 per call); *events, id order* (summaries left
   out, 32 per call in id order); *after* (``embed_missing``: events only, each page sorted by
   length, 32 per call). Reported: seconds, events per second, and the ratio to *before*.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _common import pct, table, write_result

import aiden
from aiden.recall.query import display_text
from aiden.recall.vectors import embed_missing
from aiden.storage.layout import Layout

WINDOW = 4000


def _when(text: str) -> float:
    import datetime

    return datetime.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=datetime.UTC).timestamp()


def load(path: Path) -> tuple[list[aiden.SessionEvent], list[str]]:
    """A LoCoMo file's turns as events, and its questions (categories 1-4)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    events = []
    n = 1
    while f"session_{n}" in doc:
        start = _when(doc[f"session_{n}_date_time"])
        for i, turn in enumerate(doc[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            user = turn["speaker"] == doc["speaker_a"]
            events.append(aiden.SessionEvent(type="user_input" if user else "assistant_output",
                                             role="user" if user else "assistant", content=text,
                                             timestamp=start + 30.0 * i))
        n += 1
    questions = [str(q["question"]) for q in doc.get("qa") or [] if q.get("category") in (1, 2, 3, 4)]
    return events, questions


async def replay(events: Sequence[aiden.SessionEvent], questions: Sequence[str], root: Path,
                 embedder: aiden.Embedder | None) -> dict[str, list[float]]:
    """Feed the events, compact each quarter window, time one recall after every compaction."""
    cfg = msgspec.structs.replace(aiden.Config.for_window(WINDOW), durability="none")
    recall_s: list[float] = []
    maintain_s: list[float] = []
    async with aiden.open_memory(root, config=cfg, embedder=embedder) as memory:
        since = 0
        for i, event in enumerate(events):
            await memory.append(event)
            since += memory.estimate_text(event.content)
            if since < WINDOW // 4 and i < len(events) - 1:
                continue
            since = 0
            t = time.perf_counter()
            outcome = await memory.maintain(manual=True)
            maintain_s.append(time.perf_counter() - t)
            if not outcome.compacted:
                continue
            question = questions[len(recall_s) % len(questions)]
            t = time.perf_counter()
            await memory.handle_recall_tool(json.dumps({"query": question}))
            recall_s.append(time.perf_counter() - t)
    return {"recall": recall_s, "maintain": maintain_s}


def throughput(db_path: Path, embedder: Any) -> dict[str, dict[str, float]]:
    """Seconds to embed the database's docs three ways (see the module docstring); ``events``: how many."""
    conn = sqlite3.connect(db_path)
    try:
        rows = conn.execute("SELECT d.id, d.seq, f.text FROM docs d JOIN fts f ON f.rowid = d.id ORDER BY d.id").fetchall()
        docs = [display_text(text or "") for _, _, text in rows]
        events = [display_text(text or "") for _, seq, text in rows if seq is not None]
        out: dict[str, dict[str, float]] = {}

        def timed(name: str, texts: Sequence[str], size: int) -> None:
            t = time.perf_counter()
            for start in range(0, len(texts), size):
                embedder.embed(texts[start:start + size])
            out[name] = {"seconds": time.perf_counter() - t, "texts": len(texts)}

        timed("before", docs, 64)
        timed("events, id order", events, 32)
        conn.execute("DELETE FROM vectors")
        conn.commit()
        t = time.perf_counter()
        done = embed_missing(conn, embedder)
        out["after"] = {"seconds": time.perf_counter() - t, "texts": done}
        out["events"] = {"seconds": 0.0, "texts": len(events)}
        return out
    finally:
        conn.close()


def _ms(values: Sequence[float]) -> str:
    return f"{pct(values, 50) * 1000:,.0f} / {pct(values, 99) * 1000:,.0f} / {max(values) * 1000:,.0f}"


async def main_async(files: Sequence[Path]) -> dict[str, Any] | None:
    """Replay each file lexical and hybrid; None if no file has a question to time recall with."""
    embedder = aiden.LocalMiniLMEmbedder()
    embedder.load()
    runs: dict[str, dict[str, list[float]]] = {"lexical": {"recall": [], "maintain": []},
                                               "minilm": {"recall": [], "maintain": []}}
    speeds: list[dict[str, dict[str, float]]] = []
    for path in files:
        events, questions = load(path)
        if not questions:
            print(f"({path.name} skipped: no category 1-4 question to time recall with)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="aiden-re-") as tmp:
            for name, emb in (("lexical", None), ("minilm", embedder)):
                got = await replay(events, questions, Path(tmp) / name, emb)
                for key, values in got.items():
                    runs[name][key] += values
            copy = Path(tmp) / "copy.sqlite3"
            shutil.copyfile(Layout(Path(tmp) / "minilm").recall_db, copy)
            speeds.append(await anyio.to_thread.run_sync(throughput, copy, embedder))
        print(f"{path.name}: {len(events)} events", file=sys.stderr)
    if not speeds:
        return None
    total = {w: {"seconds": sum(s[w]["seconds"] for s in speeds), "texts": sum(s[w]["texts"] for s in speeds)}
             for w in speeds[0]}
    return {"runs": runs, "throughput": total, "events": total.pop("events")["texts"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--conversations", type=int, default=2, help="how many LoCoMo conversations (default 2)")
    args = ap.parse_args()
    value = os.environ.get("AIDEN_REAL_DATA")
    files = sorted((Path(value) / "locomo").glob("*.json"))[: args.conversations] if value else []
    if not files:
        print(f"skipped: no LoCoMo files (AIDEN_REAL_DATA={value!r})")
        return
    try:
        aiden.LocalMiniLMEmbedder().load()
    except aiden.AidenError as exc:
        print(f"skipped: {exc}")
        return
    r = anyio.run(main_async, files)
    if r is None:
        print("skipped: no LoCoMo file has a category 1-4 question")
        return
    runs, speed = r["runs"], r["throughput"]
    print(f"# Hybrid recall's embedding ({len(files)} LoCoMo conversations, LocalMiniLMEmbedder)\n")
    print(table(["replay", "compactions", "first recall after a compaction, ms p50 / p99 / max",
                 "maintain(manual=True), ms p50 / p99 / max"],
                [[name, len(v["recall"]), _ms(v["recall"]), _ms(v["maintain"])] for name, v in runs.items()]))
    before = speed["before"]["seconds"]
    print()
    print(table(["embedding", "texts", "seconds", "events / s", "time vs before"],
                [[w, s["texts"], f"{s['seconds']:.1f}", f"{r['events'] / s['seconds']:.1f}",
                  f"{s['seconds'] / before:.2f}x"] for w, s in speed.items()]))
    path = write_result("recall_embedding", {"conversations": [f.name for f in files], **r})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
