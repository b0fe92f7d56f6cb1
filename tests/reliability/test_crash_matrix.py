"""Crash matrix: a child process exits hard (``os._exit``) at a named crash point while a
second child appends continuously (and is SIGKILLed afterwards); the parent reopens.

Checked after recovery (see ``harness.check``): acknowledged ⊆ recovered ⊆
acknowledged | in-flight, no duplicate seq or tag, hot window in seq order,
chunks | hot window gap-free from 1; a second recovery changes nothing; the
next append continues the sequence.

A scenario whose starting state is costly to reach (``segment``: 34 committed chunks) has it
built once per module by a ``builder`` child; each of its points copies that root, so its
crasher reaches the checkpoint in its first passes, with the concurrent appender running.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiden
from aiden import SessionEvent
from aiden.testing import ScriptedSummarizer
from tests.reliability.child import CRASH_EXIT, config_for
from tests.reliability.harness import (
    ChildLog,
    ForkServer,
    Verdict,
    check,
    read_root,
    report,
    spawn_child,
    tag_of,
)

# point id -> (scenario run by the crasher, checkpoint name, highest hit number to crash at)
POINTS: dict[str, tuple[str, str, int]] = {
    # append path
    "append.after_write": ("append", "append.after_write", 25),
    "append.after_fsync": ("append", "append.after_fsync", 25),
    "repair.after_quarantine": ("repair", "repair.after_quarantine", 2),
    # compaction commit, in order
    "chunk.before_rename": ("compaction", "chunk.before_rename", 3),
    "chunk.before_dir_fsync": ("compaction", "chunk.before_dir_fsync", 3),
    "compaction.after_chunk": ("compaction", "compaction.after_chunk", 3),
    "compaction.before_index": ("compaction", "compaction.before_index", 3),
    "index.before_rename": ("compaction", "index.before_rename", 3),
    "index.before_dir_fsync": ("compaction", "index.before_dir_fsync", 3),
    "compaction.after_index": ("compaction", "compaction.after_index", 3),
    "events.before_rename": ("compaction", "events.before_rename", 3),
    "events.before_dir_fsync": ("compaction", "events.before_dir_fsync", 3),
    "compaction.after_replace": ("compaction", "compaction.after_replace", 3),
    "summary.before_rename": ("compaction", "summary.before_rename", 3),
    "summary.before_dir_fsync": ("compaction", "summary.before_dir_fsync", 3),
    "compaction.after_summary": ("compaction", "compaction.after_summary", 3),
    # sealing a segment (the 35th chunk with summary_max_chunks=1)
    "segment.before_rename": ("segment", "segment.before_rename", 1),
    "segment.before_dir_fsync": ("segment", "segment.before_dir_fsync", 1),
    # recovery on open (of a session with a duplicated line, a garbage index and a tampered summary)
    "recover.before_index": ("recovery", "recover.before_index", 1),
    "recover_events.before_rename": ("recovery", "recover_events.before_rename", 1),
    "recover_events.before_dir_fsync": ("recovery", "recover_events.before_dir_fsync", 1),
    "recover_summary.before_rename": ("recovery", "recover_summary.before_rename", 1),
    "recover_summary.before_dir_fsync": ("recovery", "recover_summary.before_dir_fsync", 1),
    # rotation
    "rotate.before_rename": ("rotate", "rotate.before_rename", 1),
    "rotate.after_rename": ("rotate", "rotate.after_rename", 1),
    "rotate:events.before_rename": ("rotate", "events.before_rename", 1),
    "rotate:events.before_dir_fsync": ("rotate", "events.before_dir_fsync", 1),
}


# scenarios whose starting state a ``builder`` child builds once per module (see ``Templates``)
BUILT_SCENARIOS = frozenset({"segment"})


class Templates:
    """Starting states built once by a ``builder`` child, each copied for every point of its scenario."""

    def __init__(self, server: ForkServer | None, workdir: Path) -> None:
        self.server = server
        self.workdir = workdir
        self.built: dict[str, tuple[Path, ChildLog]] = {}

    def get(self, scenario: str) -> tuple[Path, ChildLog] | None:
        if scenario not in BUILT_SCENARIOS:
            return None
        if scenario not in self.built:
            work = self.workdir / scenario
            root = work / "root"
            root.mkdir(parents=True)
            child = spawn_child(self.server, ["builder", str(root), scenario, "0"], work, "builder")
            rc = child.wait(100)
            log = child.output()
            if rc != 0 or not log.lines or not log.lines[-1].startswith("BUILT "):
                raise AssertionError(f"builder for {scenario} exited {rc}: {log.lines[-3:]} {child.stderr()[-3000:]}")
            self.built[scenario] = (root, log)
        return self.built[scenario]


@pytest.fixture(scope="module")
def templates(fork_server: ForkServer | None, tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return Templates(fork_server, tmp_path_factory.mktemp("crash-templates"))


async def _reopen(root: Path, config: aiden.Config) -> aiden.RecoveryReport:
    async with aiden.open_memory(root, config=config, summarizer=ScriptedSummarizer()) as memory:
        return memory.recovery


async def _reopen_and_append(root: Path, config: aiden.Config) -> tuple[aiden.RecoveryReport, SessionEvent]:
    async with aiden.open_memory(root, config=config, summarizer=ScriptedSummarizer()) as memory:
        report_ = memory.recovery
        stored = await memory.append(SessionEvent(type="user_input", role="user", content="p:0 after recovery"))
    return report_, stored


def run_crash_case(
    server: ForkServer | None,
    workdir: Path,
    point_id: str,
    seed: int,
    *,
    peer_compact_every: int = 0,
    templates: Templates | None = None,
) -> dict[str, Any]:
    """Run one crash case end to end; returns figures and the verdict (does not assert)."""
    scenario, name, max_hit = POINTS[point_id]
    rng = random.Random(f"{point_id}/{seed}")
    hit = rng.randint(1, max_hit)
    root = workdir / "root"
    template = templates.get(scenario) if templates is not None else None
    built = ChildLog()
    if template is None:
        root.mkdir()
    else:
        shutil.copytree(template[0], root, symlinks=True)
        built = template[1]
    config = config_for(scenario)
    appender_args = ["appender", str(root), "a", str(seed), "0"]
    if peer_compact_every:
        appender_args.append(str(peer_compact_every))
    appender = spawn_child(server, appender_args, workdir, "appender")
    try:
        appender.wait_for_line(lambda log: len(log.acked) >= 1, 60)
        crasher = spawn_child(server, ["crasher", str(root), scenario, name, str(hit), str(seed)], workdir, "crasher")
        rc = crasher.wait(100)
        if peer_compact_every:
            # Let the peer run two more maintenance passes over the state the crash left.
            passes = sum(1 for line in appender.output().lines if line.startswith("M "))
            appender.wait_for_line(lambda log: sum(1 for x in log.lines if x.startswith("M ")) >= passes + 2, 60)
        # Let the appender go on a little over whatever state the crash left.
        time.sleep(rng.random() * 0.05)
    finally:
        appender.kill()
    clog, alog = crasher.output(), appender.output()
    if rc != CRASH_EXIT:
        raise AssertionError(
            f"crasher for {point_id} (hit {hit}) exited {rc}, not {CRASH_EXIT}: "
            f"{clog.lines[-3:]} {crasher.stderr()[-3000:]}"
        )
    if appender.stderr().strip() and "Traceback" in appender.stderr():
        raise AssertionError(f"appender failed: {appender.stderr()[-3000:]}")
    acked = {**built.acked, **clog.acked, **alog.acked}
    inflight = built.intents | clog.intents | alog.intents
    first = anyio.run(_reopen, root, config)
    verdict = check(root, acked, inflight)
    # The recovery scenario damages the session on purpose (a garbage index, a repeated line);
    # recovery may report exactly that damage. Nothing else may ever be unrecoverable after a crash.
    allowed_problems = (
        ("index.yaml was corrupt", "events.jsonl: event with out-of-order or duplicate seq")
        if scenario == "recovery"
        else ()
    )
    for problem in first.unrecoverable:
        if not problem.startswith(allowed_problems):
            verdict.bad_states.append(f"unrecoverable after a crash: {problem}")
    second, extra = anyio.run(_reopen_and_append, root, config)
    if second.changed:
        verdict.bad_states.append(f"second recovery changed something: {second}")
    active = read_root(root)[-1]
    others = [e.seq for e in active.events if tag_of(e) != "p:0"]
    if extra.seq != max(others, default=0) + 1:
        verdict.bad_states.append(f"append after recovery got seq {extra.seq}, expected {max(others, default=0) + 1}")
    final = check(root, {**acked, "p:0": extra.seq}, inflight | {"p:0"})
    verdict.lost += [x for x in final.lost if x not in verdict.lost]
    verdict.duplicated += [x for x in final.duplicated if x not in verdict.duplicated]
    return {
        "verdict": verdict,
        "hit": hit,
        "built_acked": len(built.acked),
        "crasher_acked": len(clog.acked),
        "appender_acked": len(alog.acked),
        "inflight_not_acked": len(inflight - set(acked)),
        "first_recovery": first,
    }


@pytest.mark.seeds(ci=1, full=6)
@pytest.mark.parametrize("point_id", list(POINTS))
def test_crash_point(
    point_id: str, seed: int, fork_server: ForkServer | None, templates: Templates, tmp_path: Path
) -> None:
    result = run_crash_case(fork_server, tmp_path, point_id, seed, templates=templates)
    verdict: Verdict = result["verdict"]
    report(
        f"crash matrix {point_id} seed {seed}",
        points_tried=1,
        crash_hit=result["hit"],
        acknowledged=verdict.acked,
        built_acked=result["built_acked"],
        crasher_acked=result["crasher_acked"],
        appender_acked=result["appender_acked"],
        inflight_not_acked=result["inflight_not_acked"],
        recovered=verdict.recovered,
        lost=len(verdict.lost),
        duplicated=len(verdict.duplicated),
        bad_states=len(verdict.bad_states),
        recovery_changed=result["first_recovery"].changed,
    )
    assert verdict.acked > 0
    assert not verdict.lost, verdict.explain()
    assert not verdict.duplicated, verdict.explain()
    assert verdict.ok, verdict.explain()


def test_crash_matrix_covers_enough_points() -> None:
    names = {name for _, name, _ in POINTS.values()}
    scenarios = {s for s, _, _ in POINTS.values()}
    report("crash matrix coverage", points=len(POINTS), distinct_checkpoints=len(names), scenarios=len(scenarios))
    assert len(POINTS) >= 12
    assert {"append", "compaction", "recovery", "rotate"} <= scenarios


def test_peer_process_compacting_after_a_crash_between_index_and_trim(
    fork_server: ForkServer | None, tmp_path: Path
) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): a compaction pass snapshots hot-window
    events that a committed chunk already covers (left behind by a crash between the index commit and
    the trim) and compacts them again into an overlapping chunk: duplicated events
    (scheduler._locked_pass / SessionStore.snapshot)
    """
    # The appender process also compacts (manual maintain every 3 batches) and is NOT reopened,
    # so it never runs recovery: it meets events.jsonl as the crashed compactor left it.
    result = run_crash_case(fork_server, tmp_path, "compaction.after_index", 0, peer_compact_every=3)
    verdict: Verdict = result["verdict"]
    report("crash after index + peer compactor", **verdict.figures())
    assert not verdict.duplicated, verdict.explain()
    assert verdict.ok, verdict.explain()
