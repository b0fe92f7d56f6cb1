"""Experience memory (issue #21): does an agent facing a task again get the right procedure back?

A small simulated world of ``--envs`` environments (repos/services named
acme, bolt, ...). Each has the same kinds of tasks, with its own values:

* ``build``: ``make build`` fails until the environment's flag is passed
  (``make build WITH_SSL=1``); in every second environment the build system
  changes later: the flag is rejected and ``./build.sh --release`` works
  (category ``changed``: the old procedure must be disputed or superseded);
* ``service``: the server refuses to start until an env var is set (``learned``);
* ``tests``: the test runner needs ``PYTHONPATH=<path>`` (``learned``);
* ``lint``: works the first time, never fails (``direct``: learned by the
  first-try rule, the run's one step having completed its goal);
* ``config``: the cache settings file must be found before it is edited: a
  ``grep -rl`` lists it among other files, the agent reads it, then edits it;
  repeat runs read and edit it straight away. In every second environment
  (not the ones whose build changes) the file moves later: the remembered
  path is not found, a ``find`` locates it (``navigation``: the probe asks
  where the file is; right = a record naming the current path);
* distractors: the docs build (a fail-then-fix lesson of its own, sharing
  the word "build"), a deploy that times out twice (no fix), reading a build
  log (a success full of build words).

The episodes are driven through the public API exactly as an agent would:
``open_memory``, ``begin_run(goal, environment=...)``, tool calls and results
appended as session events (shell-style ``exit_code`` in ``meta``),
``recall_experience`` through ``handle_tool_call`` at the start of repeat
runs, ``commit_run(outcome=...)``; after each run the worker's learning pass
(``learn_experience``, the pass the idle window would run) is timed. Then,
per environment and task, a new run starts with a query phrased like a new
task statement (not any stored goal), and ``recall_experience`` is asked.

Reported per learner mode (``embedded``; ``llm``: LiteLLMSummarizer against
the local FakeLLMServer, whose fake model words each lesson from the facts in
its prompt): top-1 hit rate (the first result is a procedure whose step is
the currently working one; for ``navigation``, a record naming the file's
current path), hit@5, stale rate (the first result, or any result,
recommends a superseded step or path), worker ms per episode, recall ms.
The overall figures are over ``learned`` and ``changed`` (as since run A);
``direct`` and ``navigation`` are reported apart.

Recall modes (``--recall``), each a full run of the same world: ``bm25`` (a memory
opened without an embedder: ``recall_experience`` ranks records by BM25
only) and ``hybrid`` (opened with ``aiden.LocalMiniLMEmbedder``:
``recall_experience`` fuses BM25 with the records' vector similarity, the
chunk recall's fusion and parameters). Also reported: how many probes a
distractor's record (docs build, deploy, build log) answers first.

Baseline, same run, same probes: SQLite FTS5 ``bm25`` over the raw episode
traces (goal + tool calls + results as text, one document per episode, the
environment filtered like recall_experience does), which is what a user
would try first. A hit = the top trace contains the working command (for
``navigation``, the current path); stale = it contains a superseded working
command (or path) but not the current one.

    python benchmarks/bench_experience.py [--envs 8] [--repeats 2] [--modes embedded,llm] [--recall bm25,hybrid]

Results: ``benchmarks/results/experience.json`` and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, machine

import aiden
from aiden import Config, SessionEvent
from aiden.experience.episodes import Outcome
from aiden.experience.records import goal_key
from aiden.memory import Memory
from aiden.testing import FakeLLMServer

NAMES: Final = ("acme", "bolt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "iris", "juniper")
FLAGS: Final = ("WITH_SSL=1", "USE_LTO=1", "STATIC=1", "NO_NATIVE=1", "WITH_GPU=0")
VARS: Final = ("DATABASE_URL", "REDIS_URL", "CONFIG_PATH", "API_TOKEN_FILE", "QUEUE_DSN")
PATHS: Final = ("src", "lib", "packages/core", "python", "app")
CATEGORIES: Final = ("learned", "changed", "direct", "navigation")
PROCEDURE_CATEGORIES: Final = ("learned", "changed")
"""The categories of the overall figures (as measured since run A): procedures asked for by a task."""
CONFIGS: Final = (
    "services/{name}/conf/redis.yaml",
    "config/redis.yml",
    "deploy/{name}/cache.toml",
    "etc/{name}/redis.conf",
    "src/{name}/settings/cache.py",
)
STYLES: Final = ("close", "far")
MODES: Final = ("embedded", "llm")
RECALLS: Final = ("bm25", "hybrid")
_WORD: Final = re.compile(r"\w+")
_FIELD: Final = re.compile(r"^(Worked|Task): (.*)$", re.MULTILINE)
_FAILED_LINE: Final = re.compile(r"^- `([^`]*)` failed with: (.*)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Step:
    """One shell call of a scripted episode and what the environment answered."""

    cmd: str
    output: str
    exit_code: int


@dataclass(frozen=True, slots=True)
class Script:
    """One scripted episode."""

    env: str
    goal: str
    steps: tuple[Step, ...]
    recall_first: bool = False


@dataclass(frozen=True, slots=True)
class Probe:
    """The agent facing a task again: the new task statement and what is right (and stale) now."""

    env: str
    task: str
    category: str
    style: str
    query: str
    working: str
    superseded: tuple[str, ...] = ()
    kind: str = "procedure"
    """``procedure``: ``working`` is the command that works now; ``navigation``: the path where the thing is."""


@dataclass(slots=True)
class World:
    """The scripted episodes (in run order) and the probes asked afterwards."""

    scripts: list[Script] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    distractors: set[str] = field(default_factory=set)
    """The goal keys of the distractor tasks (docs build, deploy, build log): a record of one is never right."""


def signature(cmd: str) -> str:
    """The step signature the learner gives ``shell {"cmd": cmd}`` (one string argument)."""
    return f"shell {' '.join(cmd.split())}"


def ok(cmd: str, output: str) -> Step:
    """A call that worked."""
    return Step(cmd, output, 0)


def err(cmd: str, output: str, code: int = 1) -> Step:
    """A call that failed."""
    return Step(cmd, output, code)


def world(envs: int, repeats: int) -> World:
    """The episodes of ``envs`` environments, interleaved round-robin, and one probe per (env, task)."""
    if not 1 <= envs <= len(NAMES):
        raise ValueError(f"envs must be between 1 and {len(NAMES)}")
    per_env: list[list[Script]] = []
    out = World()
    for i in range(envs):
        name = NAMES[i]
        env = f"repo-{name}"
        flag, var, path = FLAGS[i % len(FLAGS)], VARS[i % len(VARS)], PATHS[i % len(PATHS)]
        changes = i % 2 == 1
        build_old = f"make build {flag}"
        build_new = "./build.sh --release"
        service = f"{var}=file:///etc/{name}/{var.lower()} ./bin/{name} serve"
        config = CONFIGS[i % len(CONFIGS)].format(name=name)
        config_file = config.rsplit("/", 1)[-1]
        moves = i % 2 == 0
        config_new = f"config/{name}/{config_file}"
        tests = f"PYTHONPATH={path} pytest -q"
        lint = f"ruff check {path}"
        s: list[Script] = [
            Script(
                env,
                f"build the {name} repo",
                (
                    err(
                        "make build",
                        f"error: the {name} build requires {flag.split('=')[0]} (see BUILDING.md)",
                        2,
                    ),
                    ok(build_old, f"build ok: dist/{name}-1.4.0.tar.gz"),
                ),
            ),
            Script(
                env,
                f"start the {name} service",
                (
                    err(f"./bin/{name} serve", f"fatal: {var} is not set; refusing to start"),
                    ok(service, f"{name} listening on 0.0.0.0:8080"),
                ),
            ),
            Script(
                env,
                f"run the {name} test suite",
                (
                    err("pytest -q", f"ImportError while loading conftest: No module named '{name}'", 4),
                    ok(tests, "212 passed in 3.41s"),
                ),
            ),
            Script(env, f"lint the {name} code", (ok(lint, "All checks passed!"),)),
            Script(
                env,
                f"build the {name} docs",
                (
                    err("make docs", "make: sphinx-build: command not found", 2),
                    ok(
                        "uv run --group docs make docs",
                        "build succeeded, 41 pages written to docs/_build/html",
                    ),
                ),
            ),
            Script(
                env,
                f"deploy {name} to staging",
                (
                    err("./deploy.sh staging", "error: connection to deploy.internal timed out"),
                    err("./deploy.sh staging", "error: connection to deploy.internal timed out"),
                ),
            ),
            Script(
                env,
                f"show the last {name} build log",
                (
                    ok(
                        "tail -n 20 build.log",
                        f"[build] compiling {name} ... build finished, artifacts in dist/",
                    ),
                ),
            ),
        ]
        s.append(
            Script(
                env,
                f"raise the {name} redis timeout to 10s",
                (
                    ok(
                        "grep -rl redis .",
                        f"./README.md\n./deploy/helm/values.yaml\n./{config}\n./tests/fixtures/{config_file}",
                    ),
                    ok(f"cat {config}", "host: localhost\nport: 6379\ntimeout: 5\n"),
                    ok(f"sed -i 's/timeout: 5/timeout: 10/' {config}", ""),
                ),
            )
        )
        for r in range(repeats):
            s.append(config_run(env, name, config, r))
            s.append(
                Script(
                    env,
                    f"make a fresh build of {name}" if r % 2 == 0 else f"run the {name} build",
                    (ok(build_old, f"build ok: dist/{name}-1.4.{r + 1}.tar.gz"),),
                    recall_first=True,
                )
            )
            s.append(
                Script(
                    env,
                    f"bring up the {name} API server",
                    (ok(service, f"{name} listening on 0.0.0.0:8080"),),
                    recall_first=True,
                )
            )
            s.append(
                Script(env, f"run {name} tests", (ok(tests, f"{212 + r} passed in 3.3s"),), recall_first=True)
            )
        if changes:
            # The build system changed: the recalled step fails now, a new one works.
            s.append(
                Script(
                    env,
                    f"build the {name} repo",
                    (
                        err(
                            build_old,
                            f"error: {flag.split('=')[0]} was removed in build system v2; see ./build.sh --help",
                            2,
                        ),
                        ok(build_new, f"release build ok: dist/{name}-2.0.0.tar.gz"),
                    ),
                    recall_first=True,
                )
            )
            for r in range(repeats):
                s.append(
                    Script(
                        env,
                        f"run the {name} build",
                        (ok(build_new, f"release build ok: dist/{name}-2.0.{r + 1}.tar.gz"),),
                        recall_first=True,
                    )
                )
        if moves:
            # The settings moved: the remembered path is not found, a search finds the file elsewhere.
            s.append(
                Script(
                    env,
                    f"set the {name} redis timeout to 20s",
                    (
                        err(f"cat {config}", f"cat: {config}: No such file or directory"),
                        ok(
                            f"find . -name {config_file}", f"./{config_new}\n./tests/fixtures/{config_file}\n"
                        ),
                        ok(f"cat {config_new}", "host: localhost\nport: 6379\ntimeout: 10\n"),
                        ok(f"sed -i 's/timeout: 10/timeout: 20/' {config_new}", ""),
                    ),
                    recall_first=True,
                )
            )
            for r in range(repeats):
                s.append(config_run(env, name, config_new, r))
        per_env.append(s)
        for goal in (
            f"build the {name} docs",
            f"deploy {name} to staging",
            f"show the last {name} build log",
        ):
            out.distractors.add(goal_key(goal))
        # Two task statements per task, neither a stored goal: "close" keeps the task's noun
        # (build, service, test suite, lint), "far" says it with other words only.
        queries = {
            "build": (
                f"{name} needs a new build for the release",
                f"compile {name} for the release pipeline",
            ),
            "service": (
                f"the {name} service is down, start it again",
                f"the {name} API is down, get it running",
            ),
            "tests": (f"make sure the {name} test suite passes", f"check that the {name} unit tests pass"),
            "lint": (f"lint {name} before the review", f"check the {name} code style before the review"),
            "config": (
                f"where is the {name} redis config",
                f"which file has the {name} cache connection settings",
            ),
        }
        truth = {
            "build": ("changed" if changes else "learned", build_new if changes else build_old),
            "service": ("learned", service),
            "tests": ("learned", tests),
            "lint": ("direct", lint),
            "config": ("navigation", config_new if moves else config),
        }
        for task, (category, working) in truth.items():
            stale = (
                (build_old,)
                if task == "build" and changes
                else (config,)
                if task == "config" and moves
                else ()
            )
            kind = "navigation" if task == "config" else "procedure"
            for style, query in zip(STYLES, queries[task], strict=True):
                out.probes.append(Probe(env, task, category, style, query, working, stale, kind))
    longest = max(len(s) for s in per_env)
    out.scripts = [s[j] for j in range(longest) for s in per_env if j < len(s)]
    return out


def config_run(env: str, name: str, config: str, r: int) -> Script:
    """A repeat run on the settings file: recall, read it, edit it (an agent reads before it edits)."""
    goal, edit = (
        (f"lower the {name} redis timeout to 3s", "s/timeout: .*/timeout: 3/")
        if r % 2 == 0
        else (f"change the {name} redis port to 6380", "s/port: 6379/port: 6380/")
    )
    return Script(
        env,
        goal,
        (
            ok(f"cat {config}", "host: localhost\nport: 6379\ntimeout: 10\n"),
            ok(f"sed -i '{edit}' {config}", ""),
        ),
        recall_first=True,
    )


def trace_text(script: Script) -> str:
    """An episode's raw trace as a user would log it: the goal, each call and its result."""
    lines = [f"goal: {script.goal}"]
    for step in script.steps:
        lines.append(f"call shell {json.dumps({'cmd': step.cmd})}")
        lines.append(f"result exit_code={step.exit_code}: {step.output}")
    return "\n".join(lines)


def names_cmd(text: str, cmd: str) -> bool:
    """``text`` holds the call ``{"cmd": cmd}`` exactly (not as part of a longer command)."""
    return json.dumps({"cmd": cmd}) in text


class TraceBm25:
    """The baseline: SQLite FTS5 ``bm25`` over one document per episode trace, OR of the query's words."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE fts USING fts5(text, env UNINDEXED)")
        self.texts: list[str] = []

    def add(self, env: str, text: str) -> None:
        """Index one trace."""
        self.texts.append(text)
        self.db.execute("INSERT INTO fts(rowid, text, env) VALUES (?, ?, ?)", (len(self.texts), text, env))

    def search(self, query: str, env: str, k: int = 5) -> list[str]:
        """The ``k`` best traces of ``env`` for ``query``, best first."""
        words = list(dict.fromkeys(_WORD.findall(query)))
        if not words:
            return []
        rows = self.db.execute(
            "SELECT text FROM fts WHERE fts MATCH ? AND env = ? ORDER BY bm25(fts) LIMIT ?",
            (" OR ".join(f'"{w}"' for w in words), env, k),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        """Release the database."""
        self.db.close()


def fake_model(body: Mapping[str, Any]) -> str:
    """The fake LLM learner: words the lesson from the facts in its prompt (what a good small model does)."""
    prompt = str(body["messages"][-1]["content"])
    fields = dict(_FIELD.findall(prompt))
    worked = fields.get("Worked", "").split("` (output:")[0].strip("`")
    failed = _FAILED_LINE.findall(prompt)
    failure = f"`{failed[0][0]}` fails: {failed[0][1]}" if failed else ""
    return json.dumps(
        {
            "procedure": f"To {fields.get('Task', 'do this')}, run `{worked}`; the plain attempt fails without it.",
            "failure": failure,
        }
    )


def bench_config() -> Config:
    """Defaults, except session compaction kept out of the way: only experience work is measured."""
    return Config(
        context_window=10**9,
        count_compress_after_events=10**9,
        idle_compact_after_minutes=0.0,
        idle_gap_compact_minutes=0.0,
        session_summary_on_close=False,
    )


async def run_episode(memory: Memory, script: Script, n: int) -> None:
    """One agent run of ``script``: begin, (recall), the shell calls, commit with the observed outcome."""
    await memory.begin_run(script.goal, environment=script.env)
    if script.recall_first:
        call = f"r{n}"
        args = json.dumps({"query": script.goal})
        await memory.append(
            SessionEvent(type="tool_call", tool_name="recall_experience", tool_call_id=call, tool_args=args)
        )
        answer = await memory.handle_tool_call("recall_experience", args)
        await memory.append(SessionEvent(type="tool_result", tool_call_id=call, content=answer))
    for j, step in enumerate(script.steps):
        call = f"c{n}-{j}"
        await memory.append(
            SessionEvent(
                type="tool_call",
                tool_name="shell",
                tool_call_id=call,
                tool_args=json.dumps({"cmd": step.cmd}),
            )
        )
        await memory.append(
            SessionEvent(
                type="tool_result", tool_call_id=call, content=step.output, meta={"exit_code": step.exit_code}
            )
        )
    outcome: Outcome = "success" if script.steps[-1].exit_code == 0 else "failure"
    await memory.commit_run(f"{script.goal}: {outcome}", outcome=outcome)


def _points_at(record: Any, place: str) -> bool:
    """The record tells the agent where ``place`` is: a navigation record of it, or a working step
    that names it (``sed -i ... <place>``)."""
    if record.kind == "navigation":
        return str(record.step) == place
    return record.kind in ("procedure", "calibration") and place in str(record.step).split()


def _right(record: Any, probe: Probe, working: str) -> bool:
    """``record`` answers ``probe`` with ``working`` (its command, or its place)."""
    if probe.kind == "navigation":
        return _points_at(record, working)
    return bool(record.kind == "procedure" and record.step == signature(working))


def _in_trace(text: str, probe: Probe, working: str) -> bool:
    """The trace shows ``working``: the exact call, or the place named anywhere in it."""
    return working in text if probe.kind == "navigation" else names_cmd(text, working)


def _recommends(record: Any, steps: Sequence[str], probe: Probe | None = None) -> bool:
    """The record tells the agent to run one of ``steps`` (a procedure of it, a failure's 'instead'),
    or, for a navigation probe, points at one of those places."""
    if probe is not None and probe.kind == "navigation":
        return any(_points_at(record, s) for s in steps)
    sigs = [signature(s) for s in steps]
    if record.kind == "procedure":
        return str(record.step) in sigs
    return any(f"instead: `{sig}`" in str(record.body) for sig in sigs)


def _rate(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


async def run_mode(mode: str, recall: str, w: World, root: Path, server: FakeLLMServer) -> dict[str, Any]:
    """Drive every episode, learn after each, then ask every probe; aiden and the baseline side by side.

    ``recall`` ``hybrid`` opens the memory with the local MiniLM embedder, ``bm25`` without one."""
    config = bench_config()
    embedder = aiden.LocalMiniLMEmbedder() if recall == "hybrid" else None
    summarizer = (
        aiden.LiteLLMSummarizer(
            "openai/test-model", config=config, api_base=server.base_url, api_key="sk-test"
        )
        if mode == "llm"
        else None
    )
    calls_before = len(server.requests)
    learn_ms: list[float] = []
    learner: dict[str, Any] | None = None
    baseline = TraceBm25()
    rows: list[dict[str, Any]] = []
    async with aiden.open_memory(root, config=config, summarizer=summarizer, embedder=embedder) as memory:
        for n, script in enumerate(w.scripts):
            await run_episode(memory, script, n)
            baseline.add(script.env, trace_text(script))
            t0 = time.perf_counter()
            learned = await memory.learn_experience()
            learn_ms.append((time.perf_counter() - t0) * 1e3)
            if learned.episodes != 1 or learned.problems:
                raise RuntimeError(f"learning pass after episode {n}: {learned}")
            if learned.learner is not None:
                learner = msgspec.to_builtins(learned.learner)  # counters since open: the last is the total
        recall_ms: list[float] = []
        bm25_ms: list[float] = []
        answers: list[list[str]] = []
        for probe in w.probes:
            await memory.begin_run(probe.query, environment=probe.env)
            t0 = time.perf_counter()
            text = await memory.handle_tool_call("recall_experience", {"query": probe.query})
            recall_ms.append((time.perf_counter() - t0) * 1e3)
            answers.append([str(item["id"]) for item in json.loads(text)["results"]])
            await memory.commit_run("looked it up")
        records = {r.id: r for r in await memory.experience_records()}
        for probe, ids in zip(w.probes, answers, strict=True):
            got = [records[i] for i in ids]
            top = got[0] if got else None
            t0 = time.perf_counter()
            traces = baseline.search(probe.query, probe.env)
            bm25_ms.append((time.perf_counter() - t0) * 1e3)
            first = traces[0] if traces else ""
            rows.append(
                {
                    "env": probe.env,
                    "task": probe.task,
                    "category": probe.category,
                    "style": probe.style,
                    "superseded": bool(probe.superseded),
                    "top1": top is not None and _right(top, probe, probe.working),
                    "hit5": any(_right(r, probe, probe.working) for r in got),
                    "stale_top1": top is not None and _recommends(top, probe.superseded, probe),
                    "stale_any": any(_recommends(r, probe.superseded, probe) for r in got),
                    "inactive_returned": sum(r.status != "active" for r in got),
                    "results": len(got),
                    "top": f"{top.kind} {top.step}" if top is not None else "",
                    "distractor_top1": top is not None and top.goal in w.distractors,
                    "bm25_top1": _in_trace(first, probe, probe.working),
                    "bm25_hit5": any(_in_trace(t, probe, probe.working) for t in traces),
                    "bm25_stale_top1": any(_in_trace(first, probe, s) for s in probe.superseded)
                    and not _in_trace(first, probe, probe.working),
                    "bm25_stale_any": any(
                        any(_in_trace(t, probe, s) for s in probe.superseded)
                        and not _in_trace(t, probe, probe.working)
                        for t in traces
                    ),
                }
            )
        all_records = list(records.values())
    baseline.close()
    res = summary(
        mode, recall, w, rows, all_records, learn_ms, recall_ms, bm25_ms, len(server.requests) - calls_before
    )
    res["learner"] = learner
    return res


def worker_cost(learn_ms: Sequence[float]) -> dict[str, float]:
    """The learning pass after each episode, in ms: the first pass apart (it imports litellm in the LLM
    mode), then median / mean / max of the others, and the medians of the first and last quarter of
    the run (does the cost grow with the records already kept?)."""
    rest = list(learn_ms[1:]) or list(learn_ms)
    quarter = max(1, len(learn_ms) // 4)
    return {
        "first": round(learn_ms[0], 2),
        "median": round(statistics.median(rest), 2),
        "mean": round(statistics.fmean(rest), 2),
        "max": round(max(rest), 2),
        "first_quarter_median": round(statistics.median(learn_ms[:quarter]), 2),
        "last_quarter_median": round(statistics.median(learn_ms[-quarter:]), 2),
    }


def summary(
    mode: str,
    recall: str,
    w: World,
    rows: list[dict[str, Any]],
    records: Sequence[Any],
    learn_ms: Sequence[float],
    recall_ms: Sequence[float],
    bm25_ms: Sequence[float],
    llm_calls: int,
) -> dict[str, Any]:
    """Rates per category and overall for aiden and the baseline, worker cost, the record population."""

    def rates(subset: list[dict[str, Any]]) -> dict[str, Any]:
        changed = [r for r in subset if r["superseded"]]
        return {
            "probes": len(subset),
            "top1": _rate([r["top1"] for r in subset]),
            "hit5": _rate([r["hit5"] for r in subset]),
            "stale_top1": _rate([r["stale_top1"] for r in changed]),
            "stale_any": _rate([r["stale_any"] for r in changed]),
            "bm25_top1": _rate([r["bm25_top1"] for r in subset]),
            "bm25_hit5": _rate([r["bm25_hit5"] for r in subset]),
            "bm25_stale_top1": _rate([r["bm25_stale_top1"] for r in changed]),
            "bm25_stale_any": _rate([r["bm25_stale_any"] for r in changed]),
            "distractor_top1": sum(bool(r["distractor_top1"]) for r in subset),
        }

    statuses: dict[str, int] = {}
    for r in records:
        key = f"{r.kind}/{r.status}"
        statuses[key] = statuses.get(key, 0) + 1
    return {
        "mode": mode,
        "recall": recall,
        "episodes": len(w.scripts),
        "probes": len(rows),
        "overall": rates([r for r in rows if r["category"] in PROCEDURE_CATEGORIES]),
        "procedures_and_direct": rates([r for r in rows if r["category"] != "navigation"]),
        "all": rates(rows),
        "by_category": {c: rates([r for r in rows if r["category"] == c]) for c in CATEGORIES},
        "by_style": {
            s: rates([r for r in rows if r["style"] == s and r["category"] in PROCEDURE_CATEGORIES])
            for s in STYLES
        },
        "navigation_by_style": {
            s: rates([r for r in rows if r["style"] == s and r["category"] == "navigation"]) for s in STYLES
        },
        "inactive_returned": sum(int(r["inactive_returned"]) for r in rows),
        "worker_ms_per_episode": worker_cost(learn_ms),
        "recall_ms_p50": round(statistics.median(recall_ms), 2),
        "bm25_ms_p50": round(statistics.median(bm25_ms), 3),
        "llm_calls": llm_calls,
        "llm_phrased_records": sum(r.source == "llm" for r in records),
        "records": dict(sorted(statuses.items())),
        "rows": rows,
    }


async def main_async(
    envs: int, repeats: int, modes: Sequence[str], recalls: Sequence[str], tmp: Path
) -> dict[str, Any]:
    """Every (learner mode, recall mode) on a fresh root, the same world and probes."""
    w = world(envs, repeats)
    results: list[dict[str, Any]] = []
    with FakeLLMServer(responder=fake_model) as server:
        for mode in modes:
            if mode not in MODES:
                raise ValueError(f"unknown mode {mode!r}")
            for recall in recalls:
                if recall not in RECALLS:
                    raise ValueError(f"unknown recall mode {recall!r}")
                results.append(await run_mode(mode, recall, w, tmp / f"{mode}-{recall}", server))
    return {"envs": envs, "repeats": repeats, "results": results, "hybrid_vs_bm25": comparisons(results)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 2)


def comparisons(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per learner mode run both ways: hybrid's top-1 against BM25-only records and against BM25
    over traces (ratios), and the probes a distractor answered first."""
    by = {(r["mode"], r["recall"]): r for r in results}
    out: list[dict[str, Any]] = []
    for mode in dict.fromkeys(r["mode"] for r in results):
        hybrid, lexical = by.get((mode, "hybrid")), by.get((mode, "bm25"))
        if hybrid is None or lexical is None:
            continue
        groups = {
            "overall (learned + changed)": lambda r: r["overall"],
            "far wording (learned + changed)": lambda r: r["by_style"]["far"],
            "navigation": lambda r: r["by_category"]["navigation"],
            "navigation, far wording": lambda r: r["navigation_by_style"]["far"],
            "navigation, close wording": lambda r: r["navigation_by_style"]["close"],
            "all but navigation": lambda r: r["procedures_and_direct"],
            "all": lambda r: r["all"],
        }
        for label, pick in groups.items():
            h, b = pick(hybrid), pick(lexical)
            out.append(
                {
                    "mode": mode,
                    "probes": label,
                    "n": h["probes"],
                    "hybrid_top1": h["top1"],
                    "bm25_records_top1": b["top1"],
                    "bm25_traces_top1": h["bm25_top1"],
                    "hybrid_vs_bm25_records": _ratio(h["top1"], b["top1"]),
                    "hybrid_vs_bm25_traces": _ratio(h["top1"], h["bm25_top1"]),
                    "hybrid_hit5": h["hit5"],
                    "bm25_records_hit5": b["hit5"],
                    "distractor_top1_hybrid": h["distractor_top1"],
                    "distractor_top1_bm25_records": b["distractor_top1"],
                }
            )
    return out


def comparison_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown table of :func:`comparisons`."""
    lines = [
        "| learner | probes | n | top-1 hybrid | top-1 BM25 records | top-1 BM25 traces | hybrid / BM25 records |"
        " hybrid / BM25 traces | hit@5 hybrid / BM25 records | distractor top-1 hybrid / BM25 records |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in rows:
        lines.append(
            f"| {c['mode']} | {c['probes']} | {c['n']} | {_pct(c['hybrid_top1'])} | {_pct(c['bm25_records_top1'])} |"
            f" {_pct(c['bm25_traces_top1'])} | {c['hybrid_vs_bm25_records']} | {c['hybrid_vs_bm25_traces']} |"
            f" {_pct(c['hybrid_hit5'])} / {_pct(c['bm25_records_hit5'])} |"
            f" {c['distractor_top1_hybrid']} / {c['distractor_top1_bm25_records']} |"
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def table(result: Mapping[str, Any]) -> str:
    """The Markdown table for BENCHMARKS.md: one row per (mode, system, category)."""
    lines = [
        "| learner | recall | system | probes | top-1 hit | hit@5 | stale top-1 (changed, moved) | stale in top 5 (changed, moved) | worker ms/episode (median / max) | query ms p50 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in result["results"]:
        w = res["worker_ms_per_episode"]
        groups = [
            ("learned + changed", res["overall"]),
            *((f"{s} wording", res["by_style"][s]) for s in STYLES),
            *((c, res["by_category"][c]) for c in CATEGORIES),
            *((f"navigation, {s} wording", res["navigation_by_style"][s]) for s in STYLES),
        ]
        for label, g in groups:
            lines.append(
                f"| {res['mode']} | {res['recall']} | recall_experience, {label} | {g['probes']} | {_pct(g['top1'])} | {_pct(g['hit5'])} |"
                f" {_pct(g['stale_top1'])} | {_pct(g['stale_any'])} | {w['median']} / {w['max']} | {res['recall_ms_p50']} |"
            )
        for label, g in groups:
            lines.append(
                f"| {res['mode']} | {res['recall']} | BM25 over traces, {label} | {g['probes']} | {_pct(g['bm25_top1'])} |"
                f" {_pct(g['bm25_hit5'])} | {_pct(g['bm25_stale_top1'])} | {_pct(g['bm25_stale_any'])} | - |"
                f" {res['bm25_ms_p50']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", type=int, default=8, help=f"environments (1-{len(NAMES)})")
    parser.add_argument("--repeats", type=int, default=2, help="repeat runs per learned task")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--recall", default=",".join(RECALLS), help="recall modes: bm25 (no embedder), hybrid"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = anyio.run(
            main_async, args.envs, args.repeats, args.modes.split(","), args.recall.split(","), Path(tmp)
        )
    result["machine"] = machine()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "experience.json").write_text(json.dumps(result, indent=2) + "\n")
    for res in result["results"]:
        print(json.dumps({k: v for k, v in res.items() if k != "rows"}), flush=True)
    print(table(result))
    print(comparison_table(result["hybrid_vs_bm25"]))


if __name__ == "__main__":
    main()
