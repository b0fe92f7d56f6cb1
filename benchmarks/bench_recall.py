"""Recall latency as chunks grow, and the index build rate.

For each size (1k, 10k, 100k chunks; ``--quick``: 1k and 10k) a synthetic but
realistic session is generated: chunks of 4-16 events (user requests,
assistant replies, tool calls with JSON arguments, tool output with paths,
numbers and code), a summary per chunk, a Zipf-distributed technical
vocabulary, unique identifiers (hashes, ticket numbers) and Chinese text in
about one chunk in six.

* Build rate, real files: up to 10k chunks are written as real chunk files
  plus index.yaml with sealed segments (the writes skip fsync: this measures
  indexing, not the disk), then ``RecallIndex.sync()`` builds the database
  from scratch: chunks/s and events/s.
* Build rate, bulk: 100k chunks are inserted with ``RecallIndex.bulk_load``
  (no files; the same insert path minus reading and verifying files).
* Latency: wall time of the agent's full path per call: ``handle_recall_tool``
  parsing the call's JSON, ``search()`` in a worker thread (as the recall
  actor runs it) including its ``sync()`` check, the answer fitted and encoded
  (at most 4,800 characters of JSON: the largest is reported),
  after the chunks directory has been quiet for 2 s (a directory modified
  within 2 s is re-listed on every call by design) and with the database file
  in the OS page cache (read once): the steady state of a live session. Three
  rounds of distinct queries; the median round's p50/p99 is reported (this
  machine is shared and noisy), with CPU time per call beside wall time.
  Query classes: a unique ticket id, a topic word, 2-3 words from a real
  event, very common words (the stress case), a natural-language question
  (mostly stopwords around two topic words), a 2-character Chinese word, a
  Chinese two-word phrase typed without a space, an English + Chinese mix.

    python benchmarks/bench_recall.py [--quick]

Writes ``benchmarks/results/recall.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct, table, write_result

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.recall.index import BulkChunk, RecallIndex
from aiden.recall.tool import RecallHit, handle_recall_tool
from aiden.storage.chunks import ChunkEntry, ChunkIndex, save_index, seal_segments, write_chunk
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

TARGET_P99_MS = 10.0
"""Issue #15: p99 of the full tool path at 1M compacted events (100k chunks of 4-16 events)."""


def _split(words: str) -> list[str]:
    return words.split()


WORDS = _split(
    """
add agent alert api app append archive argument array assert async auth backend backup batch bench
branch buffer bug build bundle cache call callback cancel certificate change channel check checkout
chunk ci class cleanup cli client clone cluster code column commit compact compile component config
connection container context coverage crash cron csv dashboard data database deadline debug decision
default dependency deploy design diff directory disk docker docs domain download driver dump edit
email encoding endpoint environment error event exception export feature fetch field file filter fix
flag folder format frontend function gateway git graph handler hash header health helper host hotfix
image import index input install integration interface invoice issue job json kernel key label
latency layer layout lint list load lock log login loop memory merge message metric migration mock
model module monitor mount network node notification null object offset option order output owner
package page parser partition patch path payload permission pipeline plan plugin pod policy pool port
postgres preference process profile prompt proxy pull queue quota range rate read record redis
refactor region registry release repo request requirement reset resource response retry review role
rollback route row runtime sandbox scheduler schema scope script search secret server service session
setting shard shell signal snapshot socket source spec sql stack staging state storage stream string
subnet summary sync table task template tenant test thread throttle ticket timeout token tool trace
transaction trigger type update upgrade upload user validation value vault version view volume
warning webhook window worker workflow yaml zone stripe kafka nginx terraform kubernetes grafana
prometheus celery pytest mypy ruff fastapi django react webpack vite eslint sentry s3 lambda
"""
)
GLUE = _split("the a to of and in for is on with this that it we be was will by from not are as at or")
TOOLS = ["bash", "read_file", "write_file", "grep", "run_tests", "http_get", "sql_query", "edit_file"]
ZH_WORDS = _split(
    """
数据 数据库 迁移 部署 配置 服务器 接口 测试 错误 日志 用户 权限 缓存 队列 索引 查询 性能 优化 版本
发布 回滚 监控 告警 文件 目录 脚本 任务 进程 线程 内存 磁盘 网络 延迟 超时 重试 认证 密钥 证书 域名
前端 后端 页面 按钮 表格 字段 订单 支付 发票 客户 合同 报告 会议 需求 设计 方案 决定 问题 原因 修复
验证 环境 生产 预发 开发 分支 合并 提交 审查 文档 说明 中文 简洁 偏好 回答 总结 上下文 记忆 压缩
"""
)
ZH_GLUE = ["的", "了", "在", "是", "和", "我们", "需要", "已经", "请", "把", "这个", "因为", "所以"]


class NoSyncStorage(Storage):
    """Setup writes skip fsync: the benchmark measures indexing, not the disk."""

    def fsync(self, fd: int) -> None:
        return None

    def fsync_dir(self, path: Any) -> None:
        return None


class Corpus:
    """Deterministic generator of realistic chunks and of queries against them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        idents = [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}" for _ in range(3000)]
        paths = [f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py" for _ in range(1500)]
        self.vocab = WORDS + idents + paths
        rng.shuffle(self.vocab)
        self.cum = []
        total = 0.0
        for i in range(len(self.vocab)):
            total += 1.0 / (i + 1) ** 1.05
            self.cum.append(total)
        self.samples: list[tuple[str, str]] = []  # (class, query)
        self.zh_phrases: list[str] = []

    def words(self, n: int) -> list[str]:
        picked = self.rng.choices(self.vocab, cum_weights=self.cum, k=n)
        out: list[str] = []
        for w in picked:
            out.append(w)
            if self.rng.random() < 0.35:
                out.append(self.rng.choice(GLUE))
        return out

    def zh(self, n: int) -> str:
        parts = [self.rng.choice(ZH_WORDS if self.rng.random() < 0.7 else ZH_GLUE) for _ in range(n)]
        # What a user would type to find this text: two adjacent content words, no space.
        for a, b in itertools.pairwise(parts):
            if a in ZH_WORDS and b in ZH_WORDS:
                self.zh_phrases.append(a + b)
                break
        return "".join(parts) + "。"

    def sentence(self, n: int, chinese: bool) -> str:
        text = " ".join(self.words(n))
        if chinese and self.rng.random() < 0.6:
            text = self.zh(max(3, n // 3)) + " " + text if self.rng.random() < 0.5 else self.zh(n // 2)
        return text

    def chunk(self, i: int, seq: int) -> tuple[str, list[SessionEvent]]:
        rng = self.rng
        chinese = rng.random() < 0.16
        uid = f"{rng.getrandbits(40):010x}"
        ticket = f"TKT-{100000 + i}"
        events: list[SessionEvent] = []
        ts = 1_700_000_000.0 + i * 60
        n = rng.randint(4, 16)
        for k in range(n):
            kind = rng.random()
            s = seq + k
            if k == 0 or kind < 0.2:
                text = self.sentence(rng.randint(6, 24), chinese)
                if k == 0:
                    text += f" ({ticket})"
                events.append(SessionEvent(type="user_input", role="user", content=text, seq=s, timestamp=ts + k))
            elif kind < 0.45:
                events.append(
                    SessionEvent(
                        type="assistant_output",
                        role="assistant",
                        content=self.sentence(rng.randint(15, 60), chinese),
                        seq=s,
                        timestamp=ts + k,
                    )
                )
            elif kind < 0.7:
                args = json.dumps({"path": rng.choice(self.vocab), "query": " ".join(self.words(3))})
                events.append(
                    SessionEvent(
                        type="tool_call", role="assistant", tool_name=rng.choice(TOOLS), tool_args=args,
                        seq=s, timestamp=ts + k,
                    )
                )
            else:
                lines = [" ".join(self.words(rng.randint(5, 14))) for _ in range(rng.randint(2, 10))]
                if rng.random() < 0.3:
                    lines.append(f"commit {uid} exit code {rng.randint(0, 2)} in {rng.randint(1, 999)} ms")
                events.append(
                    SessionEvent(
                        type="tool_result", role="tool", content="\n".join(lines), seq=s, timestamp=ts + k
                    )
                )
        summary = self.sentence(rng.randint(30, 90), chinese) + f" Ticket {ticket}."
        # Queries are drawn from what was generated (a chunk known to match exists).
        if rng.random() < 0.05 or len(self.samples) < 50:
            ev = rng.choice([e for e in events if e.content])
            words = [w for w in ev.content.split() if w.isascii() and w.isalnum()]
            self.samples.append(("rare-id", ticket))
            if len(words) >= 3:
                start = rng.randint(0, len(words) - 3)
                self.samples.append(("words-2-3", " ".join(words[start : start + rng.randint(2, 3)])))
            if chinese and self.zh_phrases:
                self.samples.append(("zh-phrase", self.zh_phrases[-1]))
        return summary, events

    def queries(self, n: int) -> list[tuple[str, str]]:
        rng = random.Random(7)
        out: list[tuple[str, str]] = []
        mid = self.vocab[50:3000]
        top = self.vocab[:15]
        gen = {
            "topic-word": lambda: rng.choice(mid),
            "common-words": lambda: " ".join(rng.sample(top, rng.randint(1, 2))),
            "zh-2char": lambda: rng.choice([w for w in ZH_WORDS if len(w) == 2]),
            "mixed": lambda: f"{rng.choice(mid)} {rng.choice(ZH_WORDS)}",
            "question": lambda: f"what was it that we decided about the {rng.choice(mid)} for the {rng.choice(mid)}?",
        }
        by_class: dict[str, list[str]] = {}
        for cls, q in self.samples:
            by_class.setdefault(cls, []).append(q)
        classes = [*gen, *by_class]
        for i in range(n):
            cls = classes[i % len(classes)]
            q = gen[cls]() if cls in gen else rng.choice(by_class[cls])
            out.append((cls, q))
        return out


def chunk_stream(corpus: Corpus, n: int) -> Iterator[tuple[str, str, list[SessionEvent]]]:
    seq = 1
    for i in range(n):
        summary, events = corpus.chunk(i, seq)
        seq = events[-1].seq + 1
        yield f"chunk_{i:07d}", summary, events


def build_from_files(root: Path, corpus: Corpus, n: int) -> dict[str, Any]:
    layout = Layout(root)
    storage = NoSyncStorage()
    storage.mkdir(layout.session)
    entries: list[ChunkEntry] = []
    events_total = 0
    t0 = time.perf_counter()
    for chunk_id, summary, events in chunk_stream(corpus, n):
        entry = ChunkEntry(
            chunk_id=chunk_id, first_seq=events[0].seq, last_seq=events[-1].seq, count=0, sha256="",
            summary=summary,
        )
        entries.append(write_chunk(storage, layout, entry, events))
        events_total += len(events)
    index = seal_segments(storage, layout, ChunkIndex(chunks=entries), keep_live=16)
    save_index(storage, layout, index)
    write_s = time.perf_counter() - t0
    idx = RecallIndex(layout, Config())
    t0 = time.perf_counter()
    idx.sync()
    build_s = time.perf_counter() - t0
    stats = idx.stats()
    assert stats.chunks_indexed == n, stats
    # One more compaction (chunk file, then index.yaml): the incremental sync's cost.
    extra = corpus.chunk(n, entries[-1].last_seq + 1)
    entry = ChunkEntry(
        chunk_id="chunk_extra", first_seq=extra[1][0].seq, last_seq=extra[1][-1].seq, count=0, sha256="",
        summary=extra[0],
    )
    full = write_chunk(storage, layout, entry, extra[1])
    save_index(storage, layout, msgspec.structs.replace(index, chunks=[*index.chunks, full]))
    t0 = time.perf_counter()
    idx.sync()
    incremental_ms = (time.perf_counter() - t0) * 1000
    assert idx.stats().chunks_indexed == n + 1
    idx.close()
    return {
        "mode": "files",
        "chunks": n,
        "events": events_total,
        "segments": len(index.segments),
        "write_files_s": write_s,
        "build_s": build_s,
        "chunks_per_s": n / build_s,
        "events_per_s": events_total / build_s,
        "db_mb": os.path.getsize(layout.recall_db) / 1e6,
        "sync_after_one_compaction_ms": incremental_ms,
    }


def build_bulk(root: Path, corpus: Corpus, n: int) -> dict[str, Any]:
    layout = Layout(root)
    Storage().mkdir(layout.session)
    idx = RecallIndex(layout, Config())
    counter = {"events": 0}
    gen_s = 0.0

    def stream() -> Iterator[BulkChunk]:
        nonlocal gen_s
        it = chunk_stream(corpus, n)
        while True:
            t = time.perf_counter()
            item = next(it, None)
            gen_s += time.perf_counter() - t
            if item is None:
                return
            chunk_id, summary, events = item
            counter["events"] += len(events)
            yield BulkChunk(chunk_id=chunk_id, sha256="0" * 64, summary=summary, events=events)

    t0 = time.perf_counter()
    idx.bulk_load(stream())
    load_s = time.perf_counter() - t0 - gen_s
    t0 = time.perf_counter()
    idx.optimize()
    optimize_s = time.perf_counter() - t0
    idx.close()
    return {
        "mode": "bulk",
        "chunks": n,
        "events": counter["events"],
        "build_s": load_s,
        "optimize_s": optimize_s,
        "chunks_per_s": n / load_s,
        "events_per_s": counter["events"] / load_s,
        "db_mb": os.path.getsize(layout.recall_db) / 1e6,
    }


def measure(root: Path, corpus: Corpus, n_queries: int, rounds: int) -> dict[str, Any]:
    layout = Layout(root)
    # A directory modified within the last 2 s is re-listed by every call (mtime
    # granularity); measure the steady state of a quiet session.
    time.sleep(2.1)
    # Steady state of a live session: the database file is in the OS page cache.
    with open(layout.recall_db, "rb") as f:
        while f.read(1 << 24):
            pass
    config = Config()
    idx = RecallIndex(layout, config)
    idx.sync()
    queries = corpus.queries(n_queries * rounds + 50)
    warm, queries = queries[:50], queries[50:]

    # The agent's path: the tool handler parses the call, the index runs in a
    # worker thread (as in the recall actor), the answer is encoded as JSON.
    async def search(query: str, **kw: Any) -> list[RecallHit]:
        return await anyio.to_thread.run_sync(functools.partial(idx.search, query, **kw))

    async def lookup(chunk_id: str) -> RecallHit | None:
        return await anyio.to_thread.run_sync(idx.lookup, chunk_id)

    async def rehydrate(chunk_id: str, seqs: Any) -> list[SessionEvent]:
        return await anyio.to_thread.run_sync(idx.rehydrate, chunk_id, seqs)

    async def call(query: str) -> str:
        return await handle_recall_tool(
            json.dumps({"query": query}), search=search, lookup=lookup, rehydrate=rehydrate,
            max_chars=config.recall_max_chars,
        )

    async def rounds_of_queries() -> tuple[list[dict[str, float]], dict[str, list[float]], int, list[int]]:
        for _, q in warm:
            await call(q)
        per_class: dict[str, list[float]] = {}
        round_stats: list[dict[str, float]] = []
        empty = 0
        sizes: list[int] = []
        # Distinct queries per round; the machine is shared, so report the median round.
        for r in range(rounds):
            wall: list[float] = []
            cpu: list[float] = []
            for cls, q in queries[r * n_queries : (r + 1) * n_queries]:
                t, c = time.perf_counter_ns(), time.process_time_ns()
                answer = await call(q)
                cpu.append((time.process_time_ns() - c) / 1e6)
                ms = (time.perf_counter_ns() - t) / 1e6
                wall.append(ms)
                per_class.setdefault(cls, []).append(ms)
                sizes.append(len(answer))
                empty += answer.startswith('{"results":[]')
            round_stats.append(
                {"p50_ms": pct(wall, 50), "p99_ms": pct(wall, 99), "cpu_p50_ms": pct(cpu, 50), "cpu_p99_ms": pct(cpu, 99)}
            )
        return round_stats, per_class, empty, sizes

    round_stats, per_class, empty, sizes = anyio.run(rounds_of_queries)
    t = time.perf_counter_ns()
    for _ in range(1000):
        idx.sync()
    sync_us = (time.perf_counter_ns() - t) / 1000 / 1000
    idx.close()
    med = {key: statistics.median(rs[key] for rs in round_stats) for key in round_stats[0]}
    return {
        "queries_per_round": n_queries,
        "rounds": round_stats,
        **med,
        "empty_results": empty,
        "answer_chars_max": max(sizes),
        "answer_chars_p50": pct([float(x) for x in sizes], 50),
        "sync_noop_us": sync_us,
        "by_class": {
            cls: {"n": len(v), "p50_ms": pct(v, 50), "p99_ms": pct(v, 99)} for cls, v in sorted(per_class.items())
        },
    }


def run(quick: bool) -> dict[str, Any]:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    n_queries = 300 if quick else 1000
    rounds = 3
    results: list[dict[str, Any]] = []
    base = Path(tempfile.mkdtemp(prefix="aiden-bench-recall-"))
    try:
        for n in sizes:
            root = base / f"s{n}"
            corpus = Corpus(seed=n)
            build = build_from_files(root, corpus, n) if n <= 10_000 else build_bulk(root, corpus, n)
            latency = measure(root, corpus, n_queries, rounds)
            results.append({"size": n, "build": build, "latency": latency})
            print(
                f"{n:>7} chunks: build {build['chunks_per_s']:,.0f} chunks/s ({build['mode']}), "
                f"p50 {latency['p50_ms']:.2f} ms, p99 {latency['p99_ms']:.2f} ms",
                file=sys.stderr,
            )
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {"quick": quick, "target_p99_ms": TARGET_P99_MS, "sizes": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="only 1k and 10k chunks")
    args = parser.parse_args()
    data = run(args.quick)
    path = write_result("recall", data)
    rows = []
    for r in data["sizes"]:
        b, lat = r["build"], r["latency"]
        rows.append(
            [
                f"{r['size']:,}",
                f"{b['events']:,}",
                b["mode"],
                round(b["chunks_per_s"]),
                round(b["events_per_s"]),
                round(b["db_mb"], 1),
                round(lat["p50_ms"], 2),
                round(lat["p99_ms"], 2),
                "yes" if lat["p99_ms"] <= TARGET_P99_MS else "NO",
                lat["answer_chars_max"],
                round(lat["cpu_p50_ms"], 2),
                round(lat["cpu_p99_ms"], 2),
                round(lat["sync_noop_us"], 1),
                round(b["sync_after_one_compaction_ms"], 1) if "sync_after_one_compaction_ms" in b else "-",
            ]
        )
    print("### Recall index\n")
    print(
        table(
            [
                "chunks", "events", "build", "chunks/s", "events/s", "DB MB",
                "p50 ms", "p99 ms", "p99<=10ms", "answer chars max", "CPU p50 ms", "CPU p99 ms", "no-op sync us",
                "sync after 1 compaction ms",
            ],
            rows,
        )
    )
    classes = sorted({c for r in data["sizes"] for c in r["latency"]["by_class"]})
    class_rows = []
    for cls in classes:
        row: list[Any] = [cls]
        for r in data["sizes"]:
            c = r["latency"]["by_class"].get(cls)
            row.append(f"{c['p50_ms']:.2f} / {c['p99_ms']:.2f}" if c else "-")
        class_rows.append(row)
    print("\n#### p50 / p99 ms by query class (all rounds pooled)\n")
    print(table(["query class", *[f"{r['size']:,}" for r in data["sizes"]]], class_rows))
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
