#!/usr/bin/env python
# ruff: noqa: E402  (imports follow the sys.path set-up)
"""Recall quality: does aiden's recall answer hold the evidence more often than the baselines a user would try?

    python benchmarks/bench_recall_quality.py [--corpus locomo|generated|all] [--quick] [--embedder minilm]

Everything is measured in the same run, on the same events and the same questions.

1. **Replay into aiden.** Each conversation of a corpus is appended to a fresh
   ``aiden.open_memory`` (temp dir, ``Config.for_window(window)`` with a small
   window, the embedded extractive summarizer, no network, ``durability: none``).
   Whenever the events appended since the last compaction reach a quarter of the
   window (aiden's estimate), ``maintain(manual=True)`` compacts, the way the
   trigger would between 50% and the 25% ``keep_recent`` target; one last manual
   pass runs at the end. Everything but the final hot window is then compacted.
   A question counts only if at least one of its evidence events is compacted
   (not in ``hot_window()``); the others are reported as ``dropped_hot``, and
   only compacted evidence events count as hits.
2. **aiden.** Each question goes through the agent path,
   ``memory.handle_recall_tool('{"query": question}')`` (a JSON string, default
   config: at most ``recall_max_chars`` = 4,800 characters). A question is
   *found* when one of its evidence seqs is a primary result of the answer
   (:func:`answer_seqs`: a result's ``seq``, never its ``context`` neighbour or a
   ``summary_of`` range). With ``--embedder minilm`` the conversation is replayed
   a second time into a memory with ``LocalMiniLMEmbedder`` (``aiden_hybrid``).
3. **Baselines, raw compacted events, packed into the same budget.** Each ranks
   the raw events and packs ``{"results": [{"seq", "text"}]}`` in rank order
   until 4,800 characters are full (the result that would overflow is cut).
   ``bm25``: SQLite FTS5 (``unicode61``), OR of every word of the question;
   ``bm25_porter``: the same with the porter stemmer (the stronger of the two);
   ``dense`` (LoCoMo): cosine similarity of all-MiniLM-L6-v2 vectors of the
   question and of each event (cached under the temp dir); ``rrf``: reciprocal
   rank fusion (k = 60) of ``bm25_porter`` and ``dense``.

Corpora:

* ``locomo`` (the target): the ten LoCoMo conversations of
  ``$AIDEN_REAL_DATA/locomo`` (skipped, saying why, when absent; never copied),
  fed as a chat app would log them (:func:`locomo_conversation`: one event per
  turn, the speaker's name in the text, the session date as the timestamp),
  window 4,000 tokens; categories 1-4 (multi-hop, temporal, open-domain,
  single-hop) with their labelled evidence turns.
* ``generated`` (``--corpus generated``): deterministic (seeded) multi-day
  coding-agent conversations with planted facts asked by paraphrases and
  stopword-heavy questions; ``real``: the SWE-agent sessions of
  ``$AIDEN_REAL_DATA/swe-agent`` with hand-written questions;
  ``short_queries``: 1-3 consecutive non-stopword words drawn from single
  events of both (every real session, with questions or not).

Questions for a real session ``<name>.traj`` come from ``<name>.questions.json``
beside it when that file exists, else from the built-in table ``REAL_QUESTIONS``
(the five sessions of ``../shared/data``). The file is a JSON list of
``[question, marker]`` pairs, the shape of a ``REAL_QUESTIONS`` entry::

    [["how many lines is fields.py?", "(1997 lines total)"],
     ["how was the rounding fixed?", "int(round("]]

The marker is an exact substring of the evidence: every event whose text (content,
tool name, tool arguments) holds it is evidence. A session with neither is left out
of ``real`` (printed, and counted with its name under ``skipped`` in the JSON), and a
corpus left with no question to count is reported as skipped, not measured.

Writes ``benchmarks/results/recall_quality.json`` (every question's record) and
prints per corpus: a summary, a per-category table (pooled first), and query
latency p50/p99 with the first recall after the last compaction.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
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
from aiden.events import SessionEvent

BUDGET_CHARS = 4800
"""Character budget of one answer (``Config.recall_max_chars``'s default): the baseline is packed into it."""
DEPTH = 200
"""Ranked rows a baseline packs from (far more than fit into the budget)."""
HOLDERS = 5
"""A question is *discriminating* when at most this many compacted events hold all its words."""
GENERATED_WINDOW = 6000
REAL_WINDOW = 4000
BASE_TIME = 1_764_000_000.0
SYSTEMS = ("aiden", "aiden_hybrid", "bm25", "bm25_porter", "dense", "rrf")
"""Every system a record may hold; ``aiden_hybrid`` only with an embedder, ``dense`` and ``rrf`` only with
the baseline embedder."""

# --------------------------------------------------------------------------------------------
# answers and hits
# --------------------------------------------------------------------------------------------


def answer_seqs(answer_json: str) -> set[int]:
    """The seqs of the primary results of one ``recall_session_chunks`` answer.

    New format: ``{"results": [{"seq": 123, ...}, {"summary_of": [a, b], ...}]}`` gives each
    result's ``seq`` (not its ``context`` neighbour, not summary ranges). Old format:
    ``{"results": [{"matches": [{"seqs": [a, b], ...}], ...}]}`` gives every seq of every
    match range. An error answer or anything unparsable gives the empty set.
    """
    try:
        doc = json.loads(answer_json)
    except ValueError:
        return set()
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        return set()
    out: set[int] = set()
    for r in results:
        if not isinstance(r, dict):
            continue
        seq = r.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            out.add(seq)
        for m in r.get("matches") or ():
            span = m.get("seqs") if isinstance(m, dict) else None
            if isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) for x in span):
                out.update(range(span[0], span[1] + 1))
    return out


def answer_ranges(answer_json: str) -> set[int]:
    """Every seq inside a returned chunk's range (old ``first_seq``..``last_seq``, new ``summary_of``)
    plus :func:`answer_seqs`: a looser, chunk-level "found" (secondary figure, not the target)."""
    out = answer_seqs(answer_json)
    try:
        doc = json.loads(answer_json)
    except ValueError:
        return out
    for r in doc.get("results") or () if isinstance(doc, dict) else ():
        if not isinstance(r, dict):
            continue
        span = r.get("summary_of")
        if not (isinstance(span, list) and len(span) == 2):
            span = [r.get("first_seq"), r.get("last_seq")]
        if all(isinstance(x, int) and not isinstance(x, bool) for x in span):
            out.update(range(span[0], span[1] + 1))
    return out


def event_text(event: SessionEvent) -> str:
    """The searchable text of an event: content, tool name and tool arguments (as aiden indexes it)."""
    return "\n".join(p for p in (event.content, event.tool_name or "", event.tool_args or "") if p)


_WORD = re.compile(r"[^\W_]+")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Bm25:
    """The baseline: SQLite FTS5 over the compacted events, OR of the query's words."""

    def __init__(self, rows: Iterable[tuple[int, str]], tokenize: str = "unicode61") -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE fts USING fts5(text, tokenize='{tokenize}')")
        self.db.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", rows)

    @staticmethod
    def match_expression(query: str) -> str:
        """``"w1" OR "w2" ...``: every word of ``query`` (punctuation stripped, first occurrence)."""
        words = list(dict.fromkeys(_WORD.findall(query)))
        return " OR ".join(f'"{w}"' for w in words)

    def search(self, query: str, limit: int = DEPTH) -> list[tuple[int, str]]:
        expr = self.match_expression(query)
        if not expr:
            return []
        rows = self.db.execute(
            "SELECT rowid, text FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (expr, limit)
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def answer(self, query: str) -> str:
        return pack(self.search(query))

    def holders(self, query: str) -> int:
        """How many compacted events hold every word of ``query``: above a few, even a
        perfect lexical ranker must guess among them (ties of templated text)."""
        words = list(dict.fromkeys(_WORD.findall(query)))
        if not words:
            return 0
        expr = " AND ".join(f'"{w}"' for w in words)
        return int(self.db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (expr,)).fetchone()[0])

    def close(self) -> None:
        self.db.close()


def pack(rows: Sequence[tuple[int, str]], max_chars: int = BUDGET_CHARS) -> str:
    """``{"results": [{"seq", "text"}]}`` in rank order within ``max_chars``: the result that
    would overflow has its text cut to fit (dropped if nothing is left), then packing stops."""
    items: list[dict[str, Any]] = []
    doc = {"results": items}
    for seq, text in rows:
        item: dict[str, Any] = {"seq": seq, "text": text}
        items.append(item)
        out = _dumps(doc)
        if len(out) <= max_chars:
            continue
        while len(out) > max_chars and item["text"]:
            over = len(out) - max_chars
            item["text"] = item["text"][: max(0, len(item["text"]) - over)]
            out = _dumps(doc)
        if not item["text"]:
            items.pop()
        break
    return _dumps(doc)


class Dense:
    """Baseline: cosine similarity of the query's vector to each compacted event's (raw turns)."""

    def __init__(self, rows: Sequence[tuple[int, str]], vectors: Any, embed: Callable[[str], Any]) -> None:
        self.rows = list(rows)
        self.vectors = vectors
        self.embed = embed

    def search(self, query: str, limit: int = DEPTH) -> list[tuple[int, str]]:
        import numpy as np

        scores = self.vectors @ self.embed(query)
        best = np.argsort(-scores, kind="stable")[:limit]
        return [self.rows[i] for i in best]

    def answer(self, query: str) -> str:
        return pack(self.search(query))

    def close(self) -> None:
        pass


class Rrf:
    """Baseline: reciprocal-rank fusion (k=60) of a BM25 and a dense ranking of the raw turns."""

    def __init__(self, *rankers: Bm25 | Dense) -> None:
        self.rankers = rankers

    def answer(self, query: str) -> str:
        scores: dict[int, float] = {}
        texts: dict[int, str] = {}
        for ranker in self.rankers:
            for rank, (seq, text) in enumerate(ranker.search(query), start=1):
                scores[seq] = scores.get(seq, 0.0) + 1.0 / (60 + rank)
                texts[seq] = text
        return pack([(seq, texts[seq]) for seq in sorted(scores, key=lambda s: (-scores[s], -s))])

    def close(self) -> None:
        pass


class MiniLMCache:
    """MiniLM vectors of texts for the dense baselines, cached under the temp dir (never in the repo)."""

    def __init__(self) -> None:
        from aiden.recall.embedding import LocalMiniLMEmbedder

        self.embedder = LocalMiniLMEmbedder()
        self.folder = Path(tempfile.gettempdir()) / "aiden-rq-minilm"
        self.folder.mkdir(exist_ok=True)

    def vectors(self, texts: Sequence[str]) -> Any:
        import hashlib

        import numpy as np

        key = hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:24]
        path = self.folder / f"{key}.npy"
        if path.exists():
            return np.load(path)
        out = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        np.save(path, out)
        return out

    def one(self, text: str) -> Any:
        return self.vectors([text])[0]


# --------------------------------------------------------------------------------------------
# corpora
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    category: str
    evidence: frozenset[int] = frozenset()
    """Positions (0-based) in the conversation's event list."""
    marker: str | None = None
    """Evidence computed at run time: every event whose text contains this."""


@dataclass
class Conversation:
    name: str
    events: list[SessionEvent]
    questions: list[Question]
    window: int


def _split(words: str) -> list[str]:
    return words.split()


STOPWORDS = frozenset(
    _split(
        """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just let lets me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t don ll re ve m d o y ok okay please thanks also still
    going get got one thing things there's it's that's we're let's i'm"""
    )
)

SERVICES = ["pricing", "billing", "checkout", "inventory", "search", "auth", "notifications", "reporting",
            "ledger", "shipping", "catalog", "payments"]
PEOPLE = ["Priya", "Marcus", "Chen Wei", "Olga", "Tomás", "Aisha", "Kenji", "Fatima", "Lars", "Noor",
          "Diego", "Hannah"]
CUSTOMERS = ["Northwind Traders", "Acme Logistics", "Globex", "Initech", "Umbrella Health", "Stark Retail",
             "Wayne Freight", "Hooli Cloud"]
LIBS = [("pydantic", "1.10.13"), ("sqlalchemy", "1.4.52"), ("celery", "5.2.7"), ("requests", "2.31.0"),
        ("boto3", "1.28.85"), ("fastapi", "0.99.1"), ("numpy", "1.26.4"), ("redis-py", "4.6.0")]
BROKERS = [("RabbitMQ", "Kafka", "we only need per-message acks, not a replayable log"),
           ("Kafka", "RabbitMQ", "the analytics team wants to replay the stream"),
           ("SQS", "RabbitMQ", "nobody wants to run brokers ourselves"),
           ("NATS", "Kafka", "latency matters more than retention here")]
REGIONS = ["eu-west-1", "eu-central-1", "ap-southeast-2", "ca-central-1", "eu-north-1"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October", "November"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
THINGS = ["refund", "discount", "coupon", "invoice", "session", "export", "webhook", "snapshot", "quota"]
CAUSES = ["the currency conversion ran twice on retried requests",
          "a timezone offset was applied to dates already stored in UTC",
          "the rounding happened per line item instead of on the total",
          "a stale read replica served the aggregation query",
          "duplicate events slipped through because the idempotency key ignored the tenant"]
TECH_WORDS = ["cache", "queue", "retry", "timeout", "worker", "config", "client", "handler", "schema",
              "migration", "deploy", "test", "log", "metric", "token", "index", "request", "session", "job",
              "batch", "limit", "pool", "settings", "entries", "service", "data", "value", "update"]


@dataclass(frozen=True)
class FactTemplate:
    key: str
    kind: str  # "user" | "assistant" | "tool"
    text: str
    questions: tuple[tuple[str, str], ...]
    topic: tuple[str, ...]
    tool: str = ""
    args: str = ""


def _t(key: str, kind: str, text: str, paraphrase: str, stopword: str, topic: str,
       tool: str = "", args: str = "") -> FactTemplate:
    return FactTemplate(key, kind, text, (("paraphrase", paraphrase), ("stopword", stopword)),
                        tuple(topic.split()), tool, args)


FACTS: tuple[FactTemplate, ...] = (
    _t("cache_ttl", "user", "let's put the cache TTL at {secs} seconds for the {svc} service, hourly is too stale",
       "how long do cached {svc} entries live?",
       "what was it that we said about how long the {svc} stuff stays around before it is thrown away?",
       "cache entries expiry"),
    _t("retries", "user", "set max retries to {small} with exponential backoff starting at {ms}ms for the {svc} client",
       "how many times does the {svc} client try again after a failed call?",
       "what did we end up doing about the thing where calls to {svc} fail and have to be repeated?",
       "retry backoff client"),
    _t("pool", "assistant", "I've raised the Postgres connection pool for {svc} from 10 to {mid} connections.",
       "how big is the database pool of {svc} now?",
       "what was it that we changed about the number of connections for {svc}?",
       "database pool connections"),
    _t("owner", "user", "{person} owns the {svc} deploy pipeline, ping them before merging anything there",
       "who should I ask before shipping changes to {svc}?",
       "who was it that we said is the one in charge of the {svc} thing?",
       "deploy pipeline merging"),
    _t("style", "user", "I prefer single quotes and 4-space indentation in Python, never tabs",
       "what formatting conventions does the user like for code?",
       "what is it that I told you about how I like the code to look?",
       "code formatting indentation"),
    _t("deadline", "user", "the {svc} migration has to be finished by {month} {day}, legal needs it before the audit",
       "when is the cutoff for moving {svc} over to the new platform?",
       "by when was it that the {svc} thing had to be done?",
       "migration audit platform"),
    _t("port", "tool", "# config/{svc}.yaml\nservice: {svc}\nlisten:\n  host: 0.0.0.0\n  port: {port}\nworkers: 4\n",
       "which TCP port does {svc} listen on?",
       "what was the number that the {svc} server was running on?",
       "listen host server", "read_file", '{{"path": "config/{svc}.yaml"}}'),
    _t("test_fail", "tool",
       "collected 212 items\n\ntests/test_{svc}.py ....F....\n\nFAILED tests/test_{svc}.py::test_{thing}_rounding - "
       "AssertionError: expected 1999 got 2000\n1 failed, 211 passed in 8.41s",
       "which check broke in the {svc} suite, and how?",
       "what was it that went wrong when we ran the tests for {svc}?",
       "tests suite failed", "run_tests", '{{"path": "tests/test_{svc}.py"}}'),
    _t("broker", "assistant", "Decision: we'll use {broker} instead of {broker2} for the {svc} queue because {reason}.",
       "which message broker did we pick for {svc}, and why?",
       "what was it that we decided to go with for the {svc} queue in the end?",
       "queue broker messages"),
    _t("branch", "user", "push everything to the branch feature/{svc}-{thing}-v2, never straight to main",
       "what git branch am I supposed to commit this work to?",
       "where was it that we said the changes should go?",
       "branch commit push"),
    _t("envvar", "assistant", "The {svc} service reads its API key from the {SVC}_API_TOKEN environment variable.",
       "where does {svc} get its credentials from?",
       "what was the name of the setting that the {svc} key comes from?",
       "credentials key setting"),
    _t("pin", "user", "pin {lib} to {ver}, the newer release breaks our {svc} serializer",
       "which version of {lib} are we locked to?",
       "what was it that we said about upgrading {lib}?",
       "version upgrade release"),
    _t("timeout", "tool", "src/{svc}/client.py:42:    TIMEOUT_SECONDS = {small}{zero}\nsrc/{svc}/client.py:43:    "
       "CONNECT_TIMEOUT = 3",
       "how long does the {svc} client wait for a reply before giving up?",
       "what was it that the {svc} client has as its wait limit?",
       "client wait reply", "grep", '{{"pattern": "TIMEOUT", "path": "src/{svc}"}}'),
    _t("ratelimit", "user", "the {svc} API allows {mid}0 requests per minute per tenant, anything above gets a 429",
       "what's the throughput cap on {svc} calls?",
       "how many of the calls to {svc} was it that we are allowed to make?",
       "api tenant calls"),
    _t("demo", "user", "the demo for {person} is on {weekday} at {hour}:30, keep the staging data clean until then",
       "when are we showing the work to {person}?",
       "what was it that I said about when the thing with {person} is happening?",
       "staging demo data"),
    _t("rootcause", "assistant", "Found it: the {svc} totals were off because {cause}.",
       "why were the {svc} numbers wrong?",
       "what was it that turned out to be the problem with the {svc} amounts?",
       "totals numbers amounts"),
    _t("region", "user", "deploy {svc} to {region} only, compliance won't let customer data leave that region",
       "which datacenter location is {svc} allowed to run in?",
       "where was it that we said the {svc} thing has to live?",
       "region compliance datacenter"),
    _t("flag", "assistant", "I put the new {svc} {thing} flow behind the feature flag `{svc}_{thing}_v2`, default off.",
       "what toggle controls the new {svc} {thing} behaviour?",
       "what was the name of the switch that we used for the new {svc} stuff?",
       "feature flow toggle"),
    _t("loglevel", "user", "keep logging at WARNING in production for {svc}, DEBUG floods the disk",
       "how verbose should {svc} logs be in prod?",
       "what was it that we said about the logs for {svc} when it is live?",
       "logging production disk"),
    _t("coverage", "user", "CI must fail when line coverage drops below {pct}%",
       "what's the minimum test coverage we enforce?",
       "what was it that we wanted the pipeline to do about the tests and how much of the code they hit?",
       "coverage pipeline tests"),
    _t("replies", "user", "answer me in short bullet points from now on, no long essays",
       "how does the user want replies formatted?",
       "what was it that I said about the way you should write to me?",
       "answer bullet format"),
    _t("ticket", "user", "the {svc} work is tracked in {TICKET}, reference it in every commit message",
       "what's the issue number for the {svc} work?",
       "what was the ticket that all of the {svc} things go under?",
       "ticket commit reference"),
    _t("handler", "assistant", "The {svc} webhook handler lives in src/{svc}/webhooks/{thing}_events.py.",
       "where is the code that handles incoming {svc} callbacks?",
       "where was it that the {svc} hooks are dealt with?",
       "webhook handler callbacks"),
    _t("batch", "user", "process {svc} events in batches of {mid}0, bigger batches time out the consumer",
       "how many records per chunk should the {svc} consumer take?",
       "what was the size that we said the {svc} groups should be?",
       "events consumer chunk"),
    _t("cron", "assistant", "The {svc} cleanup job now runs nightly at 0{small}:15 UTC via cron.",
       "when does the {svc} purge task execute?",
       "what time was it that the {svc} clean up runs at?",
       "cleanup job nightly"),
    _t("python", "user", "we're stuck on Python 3.{pyminor} in prod until the base image is rebuilt",
       "which interpreter release does production run?",
       "what was it that we said about the version of the language we are on?",
       "python image version"),
    _t("customer", "user", "{customer} is the customer who reported the {svc} outage on {weekday}",
       "which client complained about {svc} going down?",
       "who was it that told us about the {svc} problem?",
       "customer outage reported"),
    _t("oom", "tool", "NAME                     READY   STATUS      RESTARTS   AGE\n{svc}-worker-7d9f8   0/1     "
       "OOMKilled   {small}          14m\n  Limits:\n    memory: {mem}Mi\n    cpu: 500m",
       "how much RAM can the {svc} worker use before it gets killed?",
       "what was it that the memory thing for the {svc} worker was set to?",
       "worker memory killed", "bash", '{{"command": "kubectl describe pod -l app={svc}-worker"}}'),
    _t("table", "user", "call the new table {svc}_{thing}_snapshots, it matches the naming of the others",
       "what name did we pick for the new {svc} database table?",
       "what was it that we said we would call the new {svc} table?",
       "table naming snapshots"),
    _t("latency", "tool", "endpoint            p50     p95     p99\n/{svc}/quote        38ms    140ms   {big}ms\n"
       "/{svc}/health       2ms     4ms     9ms",
       "how slow is the {svc} quote endpoint at the tail?",
       "what was it that the worst response times of {svc} looked like?",
       "endpoint latency quote", "http_get", '{{"url": "http://metrics.internal/{svc}/latency"}}'),
    _t("vacation", "user", "I'm out from {month} {day} for two weeks, {person} covers for me while I'm away",
       "who is my backup during my time off?",
       "who was it that I said would take over when I am not here?",
       "away covers time"),
    _t("keyrotation", "assistant", "Rotated the {svc} signing key; the old one stays valid for {small} more days.",
       "when does the previous {svc} key stop working?",
       "how long was it that the old {svc} key still works for?",
       "signing key valid"),
    _t("money", "user", "amounts in {svc} are stored as integer cents, never floats",
       "how do we represent money values in {svc}?",
       "what was it that we said about the way {svc} keeps the amounts?",
       "amounts money stored"),
    _t("reviewer", "user", "{person2} reviews every schema migration, {person} only reviews frontend changes",
       "who has to approve database schema changes?",
       "who was it that looks at the migrations before they go in?",
       "schema migration reviews"),
    _t("healthcheck", "assistant", "I changed the {svc} health check path to /{svc}/livez with a {small}s interval.",
       "what URL does the probe hit to see if {svc} is alive?",
       "what was it that we did with the check that sees whether {svc} is up?",
       "health check probe"),
    _t("lockfile", "user", "don't touch poetry.lock by hand, regenerate it with `poetry lock --no-update`",
       "how should the dependency lock be refreshed?",
       "what was it that I said about the lock thing and how to redo it?",
       "lock dependency regenerate"),
)


def _slots(rng: random.Random, svc: str) -> dict[str, Any]:
    lib, ver = rng.choice(LIBS)
    broker, broker2, reason = rng.choice(BROKERS)
    person, person2 = rng.sample(PEOPLE, 2)
    return {
        "svc": svc, "SVC": svc.upper(), "person": person, "person2": person2,
        "customer": rng.choice(CUSTOMERS), "lib": lib, "ver": ver, "broker": broker, "broker2": broker2,
        "reason": reason, "region": rng.choice(REGIONS), "month": rng.choice(MONTHS), "day": rng.randint(2, 28),
        "weekday": rng.choice(WEEKDAYS), "hour": rng.randint(9, 16), "thing": rng.choice(THINGS),
        "cause": rng.choice(CAUSES), "secs": rng.choice([300, 600, 900, 1200, 1800, 2700]),
        "small": rng.randint(2, 9), "mid": rng.randint(12, 96), "big": rng.randint(400, 2400),
        "ms": rng.choice([100, 200, 250, 500]), "pct": rng.choice([72, 75, 80, 85, 88, 90]),
        "port": rng.randint(8001, 9899), "zero": rng.choice(["0", "5"]), "mem": rng.choice([256, 384, 512, 768]),
        "pyminor": rng.choice([8, 9, 10]), "TICKET": f"{svc[:3].upper()}-{rng.randint(1000, 9999)}",
    }


def _code(rng: random.Random, svc: str, words: Sequence[str], lines: int) -> str:
    """Python-looking file content using ``words`` (so files share vocabulary with questions)."""
    out = [f'"""{svc} {rng.choice(words)} helpers."""', "", "import logging", "", "log = logging.getLogger(__name__)"]
    n = 0
    while len(out) < lines:
        a, b = rng.choice(words), rng.choice(TECH_WORDS)
        n += 1
        out += [
            "", f"def {a}_{b}_{n}(self, {b}, tenant=None):",
            f'    """Return the {a} {b} of {svc} for the tenant."""',
            f"    value = self.{b}.get({a!r}, {rng.randint(0, 500)})",
            f"    log.debug('{svc} {a} %s', value)",
            "    return value if tenant is None else value.for_tenant(tenant)",
        ]
    return "\n".join(out[:lines])


class _Builder:
    """Accumulates events of one generated conversation with timestamps."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.events: list[SessionEvent] = []
        self.now = BASE_TIME
        self.calls = 0

    def add(self, type_: str, content: str = "", **kw: Any) -> int:
        self.now += self.rng.uniform(5, 90)
        role = {"user_input": "user", "tool_result": "tool"}.get(type_, "assistant")
        self.events.append(SessionEvent(type=type_, role=role, content=content,  # type: ignore[arg-type]
                                        timestamp=round(self.now, 3), **kw))
        return len(self.events) - 1

    def tool(self, name: str, args: str, result: str) -> int:
        self.calls += 1
        cid = f"call_{self.calls}"
        self.add("tool_call", tool_name=name, tool_call_id=cid, tool_args=args)
        return self.add("tool_result", result, tool_name=name, tool_call_id=cid)


def _filler_turn(b: _Builder, svc: str, words: Sequence[str]) -> None:
    rng = b.rng
    kind = rng.randrange(6)
    mod = rng.choice([*words, *TECH_WORDS[:8]])
    if kind == 0:
        b.add("user_input", f"can you run the {svc} tests again and tell me what's going on with {mod}?")
        b.add("assistant_output", f"Running the {svc} suite now.")
        n = rng.randint(40, 300)
        out = "\n".join(f"tests/test_{svc}_{rng.choice(TECH_WORDS)}.py {'.' * rng.randint(5, 30)}" for _ in range(6))
        b.tool("run_tests", json.dumps({"path": f"tests/{svc}"}), f"collected {n} items\n\n{out}\n\n{n} passed in {rng.uniform(1, 30):.2f}s")
        b.add("assistant_output", f"All {n} {svc} tests pass; nothing related to {mod} failed.")
    elif kind == 1:
        path = f"src/{svc}/{mod}.py"
        b.add("user_input", f"open {path} and check how the {mod} part is wired")
        b.tool("read_file", json.dumps({"path": path}), _code(rng, svc, words, rng.randint(25, 90)))
        b.add("assistant_output", f"The {mod} code in {path} reads its values from the {rng.choice(TECH_WORDS)} "
                                  f"object; I don't see anything we decided about it changing here.")
    elif kind == 2:
        w = rng.choice(words)
        b.add("assistant_output", f"Let me search for {w} usages across the {svc} package.")
        hits = "\n".join(f"src/{svc}/{rng.choice(TECH_WORDS)}.py:{rng.randint(1, 400)}:    {w}_{rng.choice(TECH_WORDS)} = "
                         f"settings.{svc}.{w}" for _ in range(rng.randint(3, 9)))
        b.tool("grep", json.dumps({"pattern": w, "path": f"src/{svc}"}), hits)
        b.add("assistant_output", f"{w} is only read in a few places in {svc}; it's all configuration plumbing.")
    elif kind == 3:
        b.add("user_input", rng.choice([
            "ok thanks, that looks good to me", "hmm, let's leave that for now and move on",
            f"what do you think we should look at next in {svc}?", "nice, keep going",
            f"wait, did we already talk about the {mod} thing for {svc}?",
        ]))
        b.add("assistant_output", rng.choice([
            f"Next I'd look at the {svc} {mod} handling; it has the most open questions.",
            f"Sure. I'll keep the {mod} changes small so the {svc} review stays easy.",
            "Understood, moving on.",
            f"We touched {svc} earlier today, but nothing about {mod} was settled yet.",
        ]))
    elif kind == 4:
        log = "\n".join(f"{rng.randrange(16**7):07x} {rng.choice(['fix', 'feat', 'chore', 'refactor'])}({svc}): "
                        f"{rng.choice(TECH_WORDS)} {rng.choice(TECH_WORDS)}" for _ in range(6))
        b.tool("bash", json.dumps({"command": "git log --oneline -6"}), log)
        b.add("assistant_output", f"Recent history on {svc} is mostly small {mod} fixes.")
    else:
        b.add("user_input", f"is there anything in the {svc} {mod} config we still need to decide?")
        b.add("assistant_output", f"A few {mod} settings of {svc} are still on their library defaults; "
                                  f"we can pick values when the load tests are in.")


def _distractor(b: _Builder, fact: FactTemplate, svc: str, other: str) -> None:
    rng = b.rng
    t1, t2 = rng.choice(fact.topic), rng.choice(fact.topic)
    text = rng.choice([
        f"I skimmed the {svc} {t1} code again, the {t2} part hasn't changed since last week.",
        f"Do we have any dashboards for {svc} {t1}? Not urgent, just curious what it looks like.",
        f"We haven't decided anything about the {t1} for {other} yet, it stays on the defaults for now.",
        f"Note to self: the {other} {t1} and {t2} settings still need a review at some point.",
        f"What was the {t1} situation for {other} again? Never mind, we can look at it later.",
    ])
    b.add(rng.choice(["user_input", "assistant_output"]), text)


def generated_corpus(seed: int = 7, conversations: int = 8, days: int = 4,
                     facts: tuple[int, int] = (22, 32), window: int = GENERATED_WINDOW) -> list[Conversation]:
    """Multi-day coding-agent conversations with planted facts (deterministic for ``seed``)."""
    out: list[Conversation] = []
    for c in range(conversations):
        rng = random.Random(seed * 1000 + c)
        b = _Builder(rng)
        services = rng.sample(SERVICES, 4)
        b.add("user_input", f"We're moving the {', '.join(services)} services onto the new platform over the next "
                            "days. Keep track of the decisions as we go.")
        chosen = rng.sample(FACTS, rng.randint(*facts))
        plan: list[tuple[FactTemplate, str]] = [(f, rng.choice(services)) for f in chosen]
        per_day = -(-len(plan) // days)
        questions: list[Question] = []
        for day in range(days):
            b.now = BASE_TIME + day * 86400 + 9 * 3600
            b.add("user_input", rng.choice(["morning! let's continue where we left off yesterday",
                                            "good morning, picking up the platform move again",
                                            "back at it, where were we?"]))
            for fact, svc in plan[day * per_day:(day + 1) * per_day]:
                others = [s for s in services if s != svc]
                words = fact.topic
                for _ in range(rng.randint(1, 3)):
                    _filler_turn(b, rng.choice(services), words)
                if rng.random() < 0.5:
                    _distractor(b, fact, svc, rng.choice(others))
                slots = _slots(rng, svc)
                text = fact.text.format(**slots)
                if fact.kind == "tool":
                    b.add("assistant_output", f"Let me check that for {svc}.")
                    pos = b.tool(fact.tool, fact.args.format(**slots), text)
                else:
                    pos = b.add("user_input" if fact.kind == "user" else "assistant_output", text)
                b.add("assistant_output" if fact.kind == "user" else "user_input",
                      rng.choice(["Noted.", "Got it, I'll keep that in mind.", "ok", "Makes sense.", "👍 thanks"]))
                for _ in range(rng.randint(0, 2)):
                    _filler_turn(b, rng.choice(services), words)
                _distractor(b, fact, rng.choice(others), svc)
                qs = list(fact.questions)
                if rng.random() < 0.4:
                    qs = qs[:1]
                for category, q in qs:
                    questions.append(Question(q.format(**slots), category, frozenset({pos})))
        out.append(Conversation(f"generated-{c}", b.events, questions, window))
    return out


# --- real sessions ---------------------------------------------------------------------------

REAL_QUESTIONS: dict[str, list[tuple[str, str]]] = {
    "function-calling-simple": [
        ("where in the repository was the script with the syntax error found?", "/SWE-agent__test-repo/tests/missing_colon.py"),
        ("how many lines long is the broken script?", "(10 lines total)"),
        ("what does the script print when run as main?", "print(division(123, 15))"),
        ("which arguments did the file search call get?", '"file_name":"missing_colon.py"'),
        ("what did the assistant first suspect was causing the SyntaxError?", "likely due to a missing colon"),
        ("what number did the fixed script output?", "8.2"),
        ("what replacement text did the edit use for the function signature?", '"replace":"def division(a: float, b: float) -> float:"'),
        ("what were the blob hashes in the index line of the submitted diff?", "index 20edef5..5857437"),
        ("which function's definition was missing its colon?", "def division(a: float, b: float) -> float"),
    ],
    "humanevalfix-python-0": [
        ("what did listing the repository root show?", ".git\nmain.py"),
        ("what is the name of the function with the bug?", "has_close_elements"),
        ("what does the buggy function's docstring say it checks?", "closer to each other than"),
        ("how was the distance computed before the fix?", "distance = elem - elem2"),
        ("how was the distance computation changed?", "abs(elem - elem2)"),
        ("why did the assistant think the calculation was wrong?", "absolute value"),
        ("what threshold does the second doctest use?", "2.0], 0.3)"),
        ("what did the assistant plan to do first, given the issue named no file?", "search the repository"),
        ("how long is main.py?", "(23 lines total)"),
        ("which line number of main.py was edited?", "edit 15:15"),
    ],
    "marshmallow-1867-function-calling": [
        ("which mypy version is pinned for linting?", "mypy==0.910"),
        ("which sphinx release do the docs extras require?", "sphinx==4.2.0"),
        ("what command installed the package for development?", "pip install -e .[dev]"),
        ("which marshmallow version got installed in the environment?", "marshmallow-3.13.0"),
        ("what did the reproduction script print before the fix?", "344"),
        ("where does fields.py live in the source tree?", "/testbed/src/marshmallow/fields.py"),
        ("what did TimeDelta._serialize return before the change?", "return int(value.total_seconds() / base_unit.total_seconds())"),
        ("how many lines is fields.py?", "(1997 lines total)"),
        ("what error message is raised for an invalid precision?", "The precision must be"),
        ("how was the rounding fixed?", "int(round("),
        ("which packages does the tests extra install?", '"tests": ["pytest", "pytz", "simplejson"]'),
        ("what went wrong with the first attempt to edit the file?", "did not use the proper indentation"),
        ("which flake8 plugin version is pinned?", "flake8-bugbear==21.9.2"),
        ("what did the directory listing of the repo root contain?", "azure-pipelines.yml"),
        ("what did the script print after the fix?", "345"),
    ],
    "pydicom-1458": [
        ("which element did the numpy handler insist on that was missing?", "PixelRepresentation"),
        ("what transfer syntax UID did the reproduction script set?", "1.2.840.10008.1.2.1"),
        ("how many bits allocated does the test dataset use?", "BitsAllocated = 32"),
        ("which photometric interpretation did the reproduction use?", "MONOCHROME2"),
        ("how many files named numpy_handler.py are there?", "Found 3 matches"),
        ("at which line of the handler was the AttributeError raised?", "line 293, in get_pixeldata"),
        ("what syntax error did the first edit attempt introduce?", "unmatched ']'"),
        ("what syntax error did the later edit attempts keep introducing?", "unmatched ')'"),
        ("when is PixelRepresentation still required after the fix?", "if 'PixelData' in ds:"),
        ("what did the reproduction print once it worked?", "Result: True"),
        ("which dataset method runs the conversion when no handler is set?", "_convert_pixel_data_without_handler"),
        ("which pixel data keywords does the handler look for?", "'FloatPixelData', 'DoubleFloatPixelData'"),
        ("how long is numpy_handler.py?", "(372 lines total)"),
        ("where are the other numpy handlers besides the pixel data one?", "overlays/numpy_handler.py"),
        ("what was the script written to reproduce the bug called?", "reproduce_bug.py"),
    ],
    "test-repo-i1": [
        ("where is missing_colon.py in this repository?", "/klieret__swe-agent-test-repo/tests/missing_colon.py"),
        ("which line range did the edit replace?", "edit 4:4"),
        ("on which line does the traceback place the syntax error?", "line 4"),
        ("what does the fixed script print?", "8.2"),
        ("from which local path did the reporter run the script?", "/Users/fuchur/Documents/24/git_sync/swe-agent-test-repo"),
        ("what command ran the script after the fix?", "python tests/missing_colon.py"),
        ("what rule did the instructions give about entering commands?", "ONLY ENTER ONE COMMAND AT A TIME"),
        ("what file mode does the diff show for the script?", "100755"),
        ("what call did the reporter make to the function in the issue?", "division(23, 0)"),
    ],
}


def real_data_dir() -> tuple[Path | None, str]:
    """The real-data folder (``AIDEN_REAL_DATA``), or None and why not."""
    value = os.environ.get("AIDEN_REAL_DATA")
    if not value:
        return None, "AIDEN_REAL_DATA is not set"
    folder = Path(value)
    if not (folder / "swe-agent").is_dir():
        return None, f"no swe-agent/ folder under {folder} (AIDEN_REAL_DATA={value!r})"
    return folder, ""


QUESTIONS_SUFFIX = ".questions.json"
"""A real session's own questions: ``<name>.questions.json`` beside ``<name>.traj``."""


def session_questions(traj: Path) -> list[tuple[str, str]]:
    """The ``(question, marker)`` pairs of one real session: its ``.questions.json``, else ``REAL_QUESTIONS``."""
    sidecar = traj.with_name(traj.stem + QUESTIONS_SUFFIX)
    if not sidecar.is_file():
        return REAL_QUESTIONS.get(traj.stem, [])
    pairs = json.loads(sidecar.read_text(encoding="utf-8"))
    if not (isinstance(pairs, list)
            and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) and x for x in p) for p in pairs)):
        raise SystemExit(f"{sidecar}: expected a JSON list of [question, marker] pairs of non-empty strings")
    return [(q, m) for q, m in pairs]


def real_corpus(window: int = REAL_WINDOW) -> tuple[list[Conversation], str]:
    """Every SWE-agent session, with its questions (:func:`session_questions`, possibly none);
    ``([], reason)`` if the data is absent."""
    folder, why = real_data_dir()
    if folder is None:
        return [], why
    from tests.governance.swe_sessions import load_sessions

    out = []
    for s in load_sessions(folder):
        qs = [Question(q, "real", marker=m) for q, m in session_questions(folder / "swe-agent" / f"{s.name}.traj")]
        events = [msgspec.structs.replace(e, seq=0, timestamp=BASE_TIME + i * 30.0) for i, e in enumerate(s.events)]
        out.append(Conversation(f"real-{s.name}", events, qs, window))
    return out, ""


# --- LoCoMo ---------------------------------------------------------------------------------

LOCOMO_WINDOW = 4000
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories with labelled evidence (5, adversarial, has none: left out)."""


def _session_time(text: str) -> float:
    """LoCoMo's session date (``1:56 pm on 8 May, 2023``) as Unix seconds (UTC)."""
    import datetime

    when = datetime.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return when.replace(tzinfo=datetime.UTC).timestamp()


def locomo_conversation(path: Path, window: int = LOCOMO_WINDOW) -> Conversation:
    """One LoCoMo file as the events a chat app would log, with its category 1-4 questions.

    Each turn is one event, in order: the first speaker as the user, the second as the
    assistant, the text prefixed by the speaker's name (two humans talking: who said it is
    part of the message) and followed by the shared photo's caption when there is one. Its
    timestamp is the session's date plus 30 s per turn, which is how aiden learns when it
    was said. A question's evidence is the positions of its ``dia_id`` s (ids that name no
    turn are ignored; a question left without evidence is counted as ``no_evidence``).
    """
    doc = json.loads(path.read_text(encoding="utf-8"))
    first = doc["speaker_a"]
    events: list[SessionEvent] = []
    where: dict[str, int] = {}
    n = 1
    while f"session_{n}" in doc:
        start = _session_time(doc[f"session_{n}_date_time"])
        for i, turn in enumerate(doc[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            user = turn["speaker"] == first
            where[turn["dia_id"]] = len(events)
            events.append(SessionEvent(type="user_input" if user else "assistant_output",
                                       role="user" if user else "assistant", content=text,
                                       timestamp=start + 30.0 * i))
        n += 1
    questions = []
    for q in doc.get("qa") or []:
        category = LOCOMO_CATEGORIES.get(q.get("category"))
        if category is None:
            continue
        evidence = frozenset(where[d] for ids in q.get("evidence", []) for d in re.split(r"[;,\s]+", ids)
                             if d in where)
        questions.append(Question(str(q["question"]), category, evidence))
    return Conversation(f"locomo-{path.stem}", events, questions, window)


def locomo_corpus(limit: int | None = None) -> tuple[list[Conversation], str]:
    """The LoCoMo conversations of ``$AIDEN_REAL_DATA/locomo``; ``([], reason)`` if absent."""
    value = os.environ.get("AIDEN_REAL_DATA")
    if not value:
        return [], "AIDEN_REAL_DATA is not set"
    folder = Path(value) / "locomo"
    files = sorted(folder.glob("*.json"))
    if not files:
        return [], f"no *.json under {folder}"
    return [locomo_conversation(f) for f in files[:limit]], ""


# --- short queries --------------------------------------------------------------------------


def short_query_corpus(sources: Sequence[Conversation], per_conversation: int = 25, seed: int = 11) -> list[Conversation]:
    """1-3 consecutive non-stopword words drawn from single events of ``sources``."""
    out = []
    for ci, conv in enumerate(sources):
        rng = random.Random(seed * 1000 + ci)
        texts = [event_text(e) for e in conv.events]
        candidates = list(range(1, len(conv.events)))  # the root input stays hot: never sampled
        rng.shuffle(candidates)
        questions: list[Question] = []
        for pos in candidates:
            if len(questions) >= per_conversation:
                break
            words = _WORD.findall(texts[pos])
            ok = [len(w) >= 3 and w.lower() not in STOPWORDS for w in words]
            n = rng.choice([1, 2, 2, 3, 3])
            while n:
                starts = [i for i in range(len(words) - n + 1) if all(ok[i:i + n])]
                if starts:
                    break
                n -= 1
            if not n:
                continue
            i = rng.choice(starts)
            evidence = frozenset(p for p, t in enumerate(texts) if t == texts[pos])
            questions.append(Question(" ".join(words[i:i + n]), f"{n}-word", evidence))
        out.append(Conversation(f"short-{conv.name}", conv.events, questions, conv.window))
    return out


# --------------------------------------------------------------------------------------------
# measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Replayed:
    name: str
    events: int
    chunks: int
    hot: int
    compacted: int
    maintain_calls: int
    questions: list[dict[str, Any]] = field(default_factory=list)
    hot_seqs: set[int] = field(default_factory=set)
    seqs: list[int] = field(default_factory=list)
    """The seq of each appended event, by position."""
    dropped_hot: int = 0
    no_evidence: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    """Hybrid only: the first search's time (it embeds whatever the maintenance pass did not)."""
    first_recall_ms: dict[str, float] = field(default_factory=dict)
    """Each aiden system's first recall after the last compaction."""


def _evidence(conv: Conversation, q: Question, texts: Sequence[str]) -> frozenset[int]:
    if q.marker is not None:
        return frozenset(p for p, t in enumerate(texts) if q.marker in t)
    return q.evidence


async def _feed(memory: aiden.Memory, conv: Conversation, texts: Sequence[str]) -> tuple[list[int], int]:
    """Append every event, compacting each quarter window of appends (and once at the end)."""
    seqs: list[int] = []
    since = 0
    calls = 0
    for event, text in zip(conv.events, texts, strict=True):
        seqs.append((await memory.append(event)).seq)
        since += memory.estimate_text(text)
        if since >= conv.window // 4:
            await memory.maintain(manual=True)
            calls += 1
            since = 0
    await memory.maintain(manual=True)
    return seqs, calls + 1


def _judge(answer: str, evidence: set[int], seconds: float) -> dict[str, Any]:
    got = answer_seqs(answer)
    out: dict[str, Any] = {"found": bool(got & evidence), "chars": len(answer), "results": sorted(got),
                           "ms": round(seconds * 1000, 3)}
    if '"error"' in answer[:10]:
        out["error"] = json.loads(answer).get("error")
    return out


async def replay(conv: Conversation, root: Path, embedder: aiden.Embedder | None = None,
                 dense: MiniLMCache | None = None) -> Replayed:
    """Replay ``conv`` into a fresh memory under ``root``, then ask every question of it.

    With ``embedder``, the conversation is replayed a second time into a memory
    with hybrid recall, and the same questions are asked there (``aiden_hybrid``).
    With ``dense``, the baselines ``dense`` (MiniLM over the raw compacted events)
    and ``rrf`` (its fusion with ``bm25_porter``) answer too.
    """
    t0 = time.perf_counter()
    cfg = msgspec.structs.replace(aiden.Config.for_window(conv.window), durability="none")
    texts = [event_text(e) for e in conv.events]
    asked: list[tuple[dict[str, Any], str, set[int]]] = []
    async with aiden.open_memory(root / "lexical", config=cfg) as memory:
        seqs, calls = await _feed(memory, conv, texts)
        hot = {e.seq for e in await memory.hot_window()}
        compacted = {s for s in seqs if s not in hot}
        out = Replayed(conv.name, len(seqs), memory.stats().compactions, len(hot), len(compacted), calls,
                       hot_seqs=hot, seqs=seqs)
        rows = [(seqs[p], texts[p]) for p in range(len(seqs)) if seqs[p] in compacted]
        bm25, porter = Bm25(rows), Bm25(rows, tokenize="porter unicode61")
        systems: dict[str, Bm25 | Dense | Rrf] = {"bm25": bm25, "bm25_porter": porter}
        if dense is not None:
            asks = [q.text for q in conv.questions]
            wanted = dict(zip(asks, dense.vectors(asks), strict=True))
            systems["dense"] = Dense(rows, dense.vectors([t for _, t in rows]), wanted.__getitem__)
            systems["rrf"] = Rrf(porter, systems["dense"])
        try:
            for q in conv.questions:
                positions = _evidence(conv, q, texts)
                if not positions:
                    out.no_evidence += 1
                    continue
                evidence = {seqs[p] for p in positions} & compacted
                if not evidence:
                    out.dropped_hot += 1
                    continue
                record: dict[str, Any] = {"conversation": conv.name, "question": q.text, "category": q.category,
                                          "evidence": sorted(evidence), "holders": bm25.holders(q.text)}
                t = time.perf_counter()
                answer = await memory.handle_recall_tool(json.dumps({"query": q.text}))
                record["aiden"] = _judge(answer, evidence, time.perf_counter() - t)
                record["aiden"]["in_chunk_range"] = bool(answer_ranges(answer) & evidence)
                if not out.questions:
                    out.first_recall_ms["aiden"] = record["aiden"]["ms"]
                for name, index in systems.items():
                    t = time.perf_counter()
                    answer = index.answer(q.text)
                    record[name] = _judge(answer, evidence, time.perf_counter() - t)
                out.questions.append(record)
                asked.append((record, q.text, evidence))
        finally:
            for index in systems.values():
                index.close()
    if embedder is not None:
        async with aiden.open_memory(root / "hybrid", config=cfg, embedder=embedder) as memory:
            hybrid_seqs, _ = await _feed(memory, conv, texts)
            assert hybrid_seqs == seqs, "the replay is deterministic"
            for i, (record, question, evidence) in enumerate(asked):
                t = time.perf_counter()
                answer = await memory.handle_recall_tool(json.dumps({"query": question}))
                record["aiden_hybrid"] = _judge(answer, evidence, time.perf_counter() - t)
                if i == 0:
                    # The first recall after the last compaction: it pays for whatever embedding
                    # the maintenance pass left to do.
                    out.embed_seconds = time.perf_counter() - t
                    out.first_recall_ms["aiden_hybrid"] = record["aiden_hybrid"]["ms"]
    out.seconds = time.perf_counter() - t0
    return out


def _rate(records: Sequence[dict[str, Any]], system: str) -> float:
    return sum(r[system]["found"] for r in records) / len(records) if records else float("nan")


def _sizes(records: Sequence[dict[str, Any]], system: str) -> dict[str, float]:
    chars = [r[system]["chars"] for r in records]
    if not chars:
        return {"median": float("nan"), "max": float("nan"), "over_budget": 0, "results_median": float("nan")}
    return {"median": statistics.median(chars), "max": max(chars),
            "over_budget": sum(c > BUDGET_CHARS for c in chars),
            "results_median": statistics.median(len(r[system]["results"]) for r in records)}


def corpus_summary(replays: Sequence[Replayed]) -> dict[str, Any]:
    records = [r for rep in replays for r in rep.questions]
    systems = [s for s in SYSTEMS if records and s in records[0]]
    out: dict[str, Any] = {
        "conversations": len(replays),
        "events": sum(r.events for r in replays),
        "compacted_events": sum(r.compacted for r in replays),
        "hot_events": sum(r.hot for r in replays),
        "chunks": sum(r.chunks for r in replays),
        "questions": len(records),
        "dropped_hot": sum(r.dropped_hot for r in replays),
        "no_evidence": sum(r.no_evidence for r in replays),
        "aiden_errors": sum("error" in r["aiden"] for r in records),
        "hit_rate": {s: _rate(records, s) for s in systems},
        "answer_chars": {s: _sizes(records, s) for s in systems},
        "aiden_chunk_range_rate": (sum(r["aiden"]["in_chunk_range"] for r in records) / len(records)
                                   if records else float("nan")),
        "aiden_only": sum(r["aiden"]["found"] and not r["bm25"]["found"] for r in records),
        "bm25_only": sum(r["bm25"]["found"] and not r["aiden"]["found"] for r in records),
        "seconds": round(sum(r.seconds for r in replays), 2),
        "systems": systems,
        "query_ms": {s: {"p50": pct([r[s]["ms"] for r in records], 50), "p99": pct([r[s]["ms"] for r in records], 99)}
                     for s in systems},
        "embed_seconds": round(sum(r.embed_seconds for r in replays), 2),
        "first_recall_ms": {s: max((r.first_recall_ms[s] for r in replays if s in r.first_recall_ms), default=None)
                            for s in ("aiden", "aiden_hybrid")},
    }
    out["delta"] = out["hit_rate"]["aiden"] - out["hit_rate"]["bm25"]
    # Questions whose words pick out at most HOLDERS compacted events: a ranker can find
    # them for sure. Beyond that it is a guess among events holding every word.
    picked = [r for r in records if r["holders"] <= HOLDERS]
    out["discriminating"] = {"questions": len(picked), **{s: _rate(picked, s) for s in systems}}
    cats: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        cats.setdefault(r["category"], []).append(r)
    out["by_category"] = {c: {"questions": len(rs), **{s: _rate(rs, s) for s in systems}}
                          for c, rs in sorted(cats.items())}
    out["per_conversation"] = [
        {"name": r.name, "events": r.events, "chunks": r.chunks, "hot": r.hot, "questions": len(r.questions),
         "dropped_hot": r.dropped_hot, "maintain_calls": r.maintain_calls, **{s: _rate(r.questions, s) for s in systems}}
        for r in replays
    ]
    return out


def render(name: str, s: dict[str, Any]) -> str:
    h, c = s["hit_rate"], s["answer_chars"]
    head = (f"**{name}**: {s['conversations']} conversations, {s['events']} events "
            f"({s['compacted_events']} compacted in {s['chunks']} chunks, {s['hot_events']} hot); "
            f"{s['questions']} questions counted, {s['dropped_hot']} dropped (evidence only in the hot window)"
            + (f", {s['no_evidence']} without evidence" if s["no_evidence"] else "")
            + (f", {s['aiden_errors']} aiden error answers" if s["aiden_errors"] else "") + ". "
            f"aiden with an evidence seq anywhere inside a returned chunk's range (summary included; "
            f"not the target): {s['aiden_chunk_range_rate']:.1%}.")
    main = table(
        ["questions", "aiden", "bm25", "bm25_porter", "delta (aiden-bm25)", "aiden only / bm25 only",
         "aiden chars med/max/>4800", "bm25 chars med/max/>4800", "result seqs med aiden/bm25"],
        [[s["questions"], f"{h['aiden']:.1%}", f"{h['bm25']:.1%}", f"{h['bm25_porter']:.1%}",
          f"{s['delta']:+.1%}", f"{s['aiden_only']} / {s['bm25_only']}",
          f"{c['aiden']['median']:,.0f} / {c['aiden']['max']:,.0f} / {c['aiden']['over_budget']}",
          f"{c['bm25']['median']:,.0f} / {c['bm25']['max']:,.0f} / {c['bm25']['over_budget']}",
          f"{c['aiden']['results_median']:g} / {c['bm25']['results_median']:g}"]],
    )
    d = s["discriminating"]
    if d["questions"] < s["questions"]:
        head += (f" Of these, {d['questions']} have words that at most {HOLDERS} compacted events all hold"
                 f" (the rest are guesses among equally matching events): aiden {d['aiden']:.1%},"
                 f" bm25 {d['bm25']:.1%}, bm25_porter {d['bm25_porter']:.1%}.")
    systems = s["systems"]
    cats = table(["category", "questions", *systems],
                 [["pooled", s["questions"], *(f"**{h[x]:.1%}**" for x in systems)]]
                 + [[k, v["questions"], *(f"{v[x]:.1%}" for x in systems)] for k, v in s["by_category"].items()])
    first = s["first_recall_ms"]
    cost = table(["system", "hit rate", "query ms p50", "query ms p99", "first recall after compaction, ms (max)",
                  "answer chars med / max / over budget"],
                 [[x, f"{h[x]:.1%}", f"{s['query_ms'][x]['p50']:.2f}", f"{s['query_ms'][x]['p99']:.2f}",
                   f"{first[x]:.1f}" if first.get(x) is not None else "",
                   f"{c[x]['median']:,.0f} / {c[x]['max']:,.0f} / {c[x]['over_budget']}"]
                  for x in systems])
    if "aiden_hybrid" in systems:
        cost += (f"\n\nHybrid: {h['aiden_hybrid'] - h['aiden']:+.1%} over lexical aiden; embedding the"
                 f" {s['compacted_events']} compacted events (and {s['chunks']} summaries) took"
                 f" {s['embed_seconds']:.1f} s.")
    return f"{head}\n\n{main}\n\n{cats}\n\n{cost}\n"


def build_corpora(quick: bool, corpus: str) -> tuple[dict[str, list[Conversation]], dict[str, str]]:
    corpora: dict[str, list[Conversation]] = {}
    skipped: dict[str, str] = {}
    if corpus in ("locomo", "all"):
        locomo, why = locomo_corpus(2 if quick else None)
        corpora["locomo"] = [c for c in locomo if c.questions]
        if unasked := [c.name for c in locomo if not c.questions]:
            skipped["locomo conversations without questions"] = (
                f"{len(unasked)} of {len(locomo)}: {', '.join(unasked)} (no category 1-4 question in the file)")
        if why:
            skipped["locomo"] = why
        elif not corpora["locomo"]:
            skipped["locomo"] = "no conversation has questions"
    if corpus in ("generated", "all"):
        generated = generated_corpus(conversations=2 if quick else 8, days=3 if quick else 4)
        real, why = real_corpus()
        asked = [c for c in real if c.questions]
        corpora |= {"generated": generated, "real": asked,
                    "short_queries": short_query_corpus([*generated, *real], per_conversation=15 if quick else 30)}
        unasked = [c.name.removeprefix("real-") for c in real if not c.questions]
        if unasked:
            skipped["real sessions without questions"] = (
                f"{len(unasked)} of {len(real)}: {', '.join(unasked)} (no <name>{QUESTIONS_SUFFIX} beside the"
                f" .traj and not in REAL_QUESTIONS; they still feed short_queries)")
        if why:
            skipped["real"] = why
        elif not asked:
            skipped["real"] = "no session has questions"
    return corpora, skipped


async def measure(corpora: dict[str, list[Conversation]],
                  progress: Callable[[str], None] = lambda _: None,
                  embedder: aiden.Embedder | None = None,
                  dense: MiniLMCache | None = None,
                  skipped: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Replay and ask every corpus; one left with no question to count goes to ``skipped`` (with why)."""
    out: dict[str, dict[str, Any]] = {}
    for name, convs in corpora.items():
        if not convs:
            continue
        replays = []
        for conv in convs:
            with tempfile.TemporaryDirectory(prefix="aiden-rq-") as tmp:
                # Dense baselines on the real conversations only: the generated tool outputs are long to embed.
                replays.append(await replay(conv, Path(tmp), embedder, dense if name == "locomo" else None))
            progress(f"{name}/{conv.name}: {len(replays[-1].questions)} questions in {replays[-1].seconds:.1f}s")
        if not any(r.questions for r in replays):
            # Nothing to rate: every question had its evidence in the hot window or nowhere.
            if skipped is not None:
                skipped[name] = (f"no question left to count ({sum(r.dropped_hot for r in replays)} dropped hot,"
                                 f" {sum(r.no_evidence for r in replays)} without evidence)")
            continue
        out[name] = corpus_summary(replays)
        out[name]["records"] = [r for rep in replays for r in rep.questions]
    return out


def _minilm(wanted: bool) -> tuple[MiniLMCache | None, str]:
    if not wanted:
        return None, "--no-dense"
    try:
        cache = MiniLMCache()
        cache.embedder.load()
    except aiden.AidenError as exc:
        return None, str(exc)
    return cache, ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--corpus", choices=("locomo", "generated", "all"), default="locomo",
                    help="locomo: $AIDEN_REAL_DATA/locomo (the target); generated: the generated, SWE-agent and"
                         " short-query corpora")
    ap.add_argument("--quick", action="store_true", help="2 conversations per corpus (a smoke run)")
    ap.add_argument("--embedder", choices=("none", "minilm"), default="none",
                    help="minilm: also replay aiden with LocalMiniLMEmbedder (column aiden_hybrid)")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense and RRF baselines (MiniLM over raw turns)")
    args = ap.parse_args()
    embedder = aiden.LocalMiniLMEmbedder() if args.embedder == "minilm" else None
    logging.getLogger("aiden").setLevel(logging.ERROR)  # "cannot get under the trigger" notes of tiny windows
    t0 = time.perf_counter()
    corpora, skipped = build_corpora(args.quick, args.corpus)
    dense, why = _minilm(not args.no_dense and "locomo" in corpora)
    if dense is None and "locomo" in corpora:
        skipped["dense baselines"] = why
    for name, why in skipped.items():
        print(f"({name} skipped: {why})\n")
    late: dict[str, str] = {}
    results = anyio.run(measure, corpora, lambda m: print(m, file=sys.stderr), embedder, dense, late)
    for name, why in late.items():
        print(f"({name} skipped: {why})\n")
    skipped |= late
    print(f"# Recall quality: aiden vs baselines (budget {BUDGET_CHARS} chars)\n")
    for name, s in results.items():
        print(render(name, s))
    path = write_result("recall_quality", {
        "quick": args.quick,
        "corpus": args.corpus,
        "hybrid": embedder.name if embedder is not None else None,
        "windows": {"generated": GENERATED_WINDOW, "real": REAL_WINDOW, "locomo": LOCOMO_WINDOW},
        "budget_chars": BUDGET_CHARS,
        "skipped": skipped,
        "corpora": results,
        "seconds": round(time.perf_counter() - t0, 1),
    })
    print(f"wrote {path} in {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
