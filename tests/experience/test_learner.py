"""Invariants of the pure experience learner (#21), over random episode sequences (hypothesis).

For any sequence of episodes over a few tasks, commands and outcomes:
learning each once, in order, gives records with unique ids, each citing
only episodes of the sequence and seqs those episodes have; learning any of
them again afterwards (a worker retried after a crash) changes nothing; no
record of a kind other than procedure/failure/fact is ever made (never a
preference, profile or rule).
"""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from aiden.experience.episodes import Episode, EpisodeRecorder, Outcome
from aiden.experience.learner import learn, rephrased
from aiden.experience.records import ExperienceRecord

TASKS = ("build", "test")
COMMANDS = ("make", "make -j1", "make TLS=1", "ninja")

step = st.tuples(st.sampled_from(COMMANDS), st.booleans(), st.booleans())  # command, ok, corrected after
Steps = list[tuple[str, bool, bool]]
# task, environment, steps, answered at the end, the caller's outcome, an observed make version
episode_spec = st.tuples(
    st.sampled_from(TASKS),
    st.sampled_from(("a", "b")),
    st.lists(step, min_size=0, max_size=5),
    st.booleans(),
    st.sampled_from(("success", "failure", "unknown")),
    st.sampled_from(("", "4.3", "4.4")),
)
Spec = tuple[str, str, Steps, bool, Outcome, str]


def build(i: int, task: str, env: str, steps: Steps, answered: bool, outcome: Outcome, make: str) -> Episode:
    rec = EpisodeRecorder(f"ep-{i}", goal=f"{task} the repo", environment=env, started_at=1000.0 * i)
    if make:
        rec.observe("make", make)
    for n, (cmd, ok, corrected) in enumerate(steps):
        rec.tool_call("shell", json.dumps({"cmd": f"{cmd} {task}"}), call_id=f"c{n}")
        rec.tool_result("shell", "ok" if ok else "error: no", ok=ok, call_id=f"c{n}")
        if corrected:
            rec.correction("that is not right")
    if answered:
        rec.answer("done")
    return rec.finish(outcome, finished_at=1000.0 * i + 10)


def apply(store: dict[str, ExperienceRecord], episode: Episode) -> tuple[ExperienceRecord, ...]:
    existing = [r for r in store.values() if r.environment == episode.environment]
    lessons = learn(episode, existing, ttl_s=None if episode.environment == "a" else 3600.0)
    for record in lessons.records:
        store[record.id] = record
    return lessons.records


@settings(max_examples=150, deadline=None)
@given(st.lists(episode_spec, min_size=1, max_size=8))
def test_learning_is_idempotent_cites_real_evidence_and_never_duplicates(specs: list[Spec]) -> None:
    episodes = [build(i + 1, *spec) for i, spec in enumerate(specs)]
    store: dict[str, ExperienceRecord] = {}
    for episode in episodes:
        changed = apply(store, episode)
        assert len({r.id for r in changed}) == len(changed)
    seqs = {e.id: {ev.seq for ev in e.events} for e in episodes}
    for record in store.values():
        assert record.kind in ("procedure", "failure", "fact")
        assert record.status in ("active", "disputed", "legacy")
        for evidence in record.evidence:
            assert evidence.episode_id in seqs
            assert set(evidence.seqs) <= seqs[evidence.episode_id]
    settled = dict(store)
    # Re-learning the newest episode (a retry after a crash) is a no-op.
    assert apply(store, episodes[-1]) == ()
    assert store == settled


@settings(max_examples=60, deadline=None)
@given(st.lists(episode_spec, min_size=1, max_size=6))
def test_learning_is_deterministic(specs: list[Spec]) -> None:
    runs = []
    for _ in range(2):
        store: dict[str, ExperienceRecord] = {}
        for i, spec in enumerate(specs):
            apply(store, build(i + 1, *spec))
        runs.append(store)
    assert runs[0] == runs[1]


def test_should_learn_only_in_the_idle_window() -> None:
    from aiden.experience.learner import should_learn

    assert should_learn(None, 0.0, 15, False) is True
    assert should_learn(100.0, 100.0 + 15 * 60, 15, False) is True
    assert should_learn(100.0, 100.0 + 15 * 60 - 1, 15, False) is False
    assert should_learn(100.0, 1e9, 15, True) is False
    assert should_learn(100.0, 1e9, 0, False) is False


def test_result_failed_reads_metadata_first_then_the_first_line() -> None:
    from aiden.experience.episodes import result_failed

    assert result_failed({"is_error": True}, "fine") is True
    assert result_failed({"error": "boom"}, "") is True
    assert result_failed({"status": "error"}, "") is True
    assert result_failed({"exit_code": 2}, "") is True
    assert result_failed({"exit_code": 0}, "error: printed but the command succeeded") is False
    assert result_failed({"returncode": True}, "ok") is False  # a bool is not an exit code
    assert result_failed({"status_code": 404}, "") is True
    assert result_failed({"status_code": 200}, "") is False
    assert result_failed({}, "\n  Traceback (most recent call last):\n  File x") is True
    assert result_failed({}, "bash: mak: command not found") is True
    assert result_failed({}, "Exit code 1") is True
    assert result_failed({}, "build ok\nerror: later lines do not count") is False
    assert result_failed({}, "") is False


def test_step_signature_shapes() -> None:
    from aiden.experience.episodes import step_signature

    assert step_signature("shell", '{"cmd": "make  build"}') == "shell make build"
    assert step_signature("shell", "make build") == "shell make build"  # not JSON: the text itself
    assert step_signature("http", '{"b": 1, "a": "x"}') == 'http {"a":"x","b":1}'
    assert step_signature("noop", "") == "noop {}"


def test_attempts_pair_by_call_id_else_by_tool_and_skip_orphans() -> None:
    from aiden.experience.episodes import assess, attempts

    rec = EpisodeRecorder("ep-x", goal="g", started_at=1.0)
    rec.tool_result("shell", "orphan", ok=True)  # no call before it: not an attempt
    rec.tool_call("shell", "a")
    rec.tool_call("http", "b", call_id="h1")
    rec.tool_result("http", "ok", ok=True, call_id="h1")
    rec.tool_result("shell", "error: x", ok=False)
    episode = rec.finish("unknown", finished_at=2.0)
    pairs = [(a.step, a.ok, a.seqs) for a in attempts(episode)]
    assert pairs == [("http b", True, (3, 4)), ("shell a", False, (2, 5))]
    assert assess(episode) == "failure"
    assert (
        assess(EpisodeRecorder("ep-y", goal="g", started_at=1.0).finish("unknown", finished_at=1.0))
        == "unknown"
    )


def test_a_legacy_procedure_that_works_again_stays_legacy_and_a_disputed_one_recovers() -> None:
    def run(i: int, steps: list[tuple[str, bool]]) -> Episode:
        rec = EpisodeRecorder(f"ep-{i}", goal="build the repo", environment="a", started_at=100.0 * i)
        for cmd, ok in steps:
            rec.tool_call("shell", cmd)
            rec.tool_result("shell", "ok" if ok else "error", ok=ok)
        return rec.finish("unknown", finished_at=100.0 * i + 1)

    store: dict[str, ExperienceRecord] = {}
    apply(store, run(1, [("make", False), ("make A=1", True)]))
    apply(store, run(2, [("make A=1", False), ("make B=1", True)]))
    status = {r.step: r.status for r in store.values() if r.kind == "procedure"}
    assert status == {"shell make A=1": "legacy", "shell make B=1": "active"}
    # One success does not revive the legacy procedure; it disputes the failure record of that step.
    changed = apply(store, run(3, [("make A=1", True)]))
    assert [(r.kind, r.step, r.status) for r in changed] == [("failure", "shell make A=1", "disputed")]
    apply(store, run(4, [("make B=1", False)]))
    assert {r.step: r.status for r in store.values() if r.kind == "procedure"}["shell make B=1"] == "disputed"
    apply(store, run(5, [("make B=1", True)]))
    proc = next(r for r in store.values() if r.step == "shell make B=1" and r.kind == "procedure")
    assert (proc.status, proc.status_reason, [e.episode_id for e in proc.evidence]) == (
        "active",
        "",
        ["ep-2", "ep-5"],
    )


def test_lesson_groups_pair_a_fix_with_the_failures_it_replaced_and_rephrasing_keeps_ids() -> None:
    rec = EpisodeRecorder("ep-g", goal="build the repo", environment="a", started_at=0.0)
    for n, (cmd, ok) in enumerate((("make", False), ("make -j1", False), ("make TLS=1", True))):
        rec.tool_call("shell", json.dumps({"cmd": cmd}), call_id=f"c{n}")
        rec.tool_result("shell", "ok" if ok else f"error: {cmd} broke", ok=ok, call_id=f"c{n}")
    rec.tool_call("fetch", json.dumps({"url": "x"}), call_id="f0")
    rec.tool_result("fetch", "error: 404", ok=False, call_id="f0")
    rec.tool_call("fetch", json.dumps({"url": "y"}), call_id="f1")
    rec.tool_result("fetch", "page", ok=True, call_id="f1")
    lessons = learn(rec.finish("success", finished_at=10.0), [])
    shell, fetch = lessons.groups
    assert (shell.step, shell.failed, shell.output) == (
        "shell make TLS=1",
        (("shell make", "error: make broke"), ("shell make -j1", "error: make -j1 broke")),
        "ok",
    )
    assert (fetch.step, fetch.failed) == ("fetch y", (("fetch x", "error: 404"),))
    by_id = {r.id: r for r in lessons.records}
    assert {shell.procedure_id, *shell.failure_ids, fetch.procedure_id, *fetch.failure_ids} == set(by_id)

    worded = {r.id: r for r in rephrased(lessons, shell, "Use the TLS flag.", "Plain make fails.").records}
    assert worded[shell.procedure_id].body == (
        "Use the TLS flag.\n\nStep: `shell make TLS=1` (worked in episode ep-g after `shell make`, "
        "`shell make -j1` failed). Verify against current observations before relying on it."
    )
    assert worded[shell.failure_ids[0]].body == (
        "Plain make fails.\n\nFailed step: `shell make`. What worked instead: `shell make TLS=1`."
    )
    assert {worded[i].source for i in (shell.procedure_id, *shell.failure_ids)} == {"llm"}
    assert worded[fetch.procedure_id] == by_id[fetch.procedure_id]  # another group's record untouched
    # An empty text keeps that side's embedded wording; the ids never change.
    kept = {r.id: r for r in rephrased(lessons, shell, "", "Plain make fails.").records}
    assert kept[shell.procedure_id] == by_id[shell.procedure_id]
    assert list(kept) == list(by_id)


def _run(eid: str, goal: str, steps: list[tuple[str, bool]], t: float) -> Episode:
    rec = EpisodeRecorder(eid, goal=goal, environment="a", started_at=t)
    for n, (cmd, ok) in enumerate(steps):
        rec.tool_call("shell", json.dumps({"cmd": cmd}), call_id=f"c{n}")
        rec.tool_result("shell", "ok" if ok else f"error: {cmd}", ok=ok, call_id=f"c{n}")
    return rec.finish("success", finished_at=t + 10)


def test_a_superseded_fix_is_no_longer_advised_by_the_failures_that_named_it() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, _run("ep-1", "build the repo", [("make", False), ("make LTO=1", True)], 0.0))
    apply(store, _run("ep-2", "test the repo", [("pytest", False), ("make LTO=1", True)], 100.0))
    (first,) = (r for r in store.values() if r.step == "shell make")
    # Same goal, but worded by hand, and one already disputed: neither is rewritten.
    worded = msgspec.structs.replace(first, id="fail-worded", body="Plain make fails; pass the flag.")
    disputed = msgspec.structs.replace(first, id="fail-disputed", status="disputed")
    store |= {worded.id: worded, disputed.id: disputed}
    before = dict(store)
    # The build changed: the flag is rejected now, a script works.
    apply(store, _run("ep-4", "build the repo", [("make LTO=1", False), ("./build.sh", True)], 300.0))
    assert store[first.id].body == (
        "For 'build the repo', `shell make` failed with: error: make\n\n"
        "What works instead now: `shell ./build.sh` (episode ep-4)."
    )
    assert store[first.id].status == "active"  # the failure still holds; its advice moved on
    for other in ("fail-worded", "fail-disputed"):
        assert store[other] == before[other]
    (pytest_failure,) = (r for r in store.values() if r.step == "shell pytest")
    assert pytest_failure == before[pytest_failure.id]  # another goal's advice is its own
    assert sorted((r.goal, r.step, r.status) for r in store.values() if r.kind == "procedure") == [
        ("build repo", "shell ./build.sh", "active"),
        ("build repo", "shell make LTO=1", "legacy"),
        ("repo test", "shell make LTO=1", "disputed"),  # the step failed here too
    ]


def test_a_confirming_episode_adds_its_wording_of_the_task_and_recall_terms_follow() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, _run("ep-0", "build the repo", [("make", False), ("make LTO=1", True)], 0.0))
    for i in range(1, 10):
        apply(store, _run(f"ep-{i}", f"compile sources variant{i}", [("make LTO=1", True)], 100.0 * i))
    (procedure,) = (r for r in store.values() if r.kind == "procedure")
    # At most MAX_TASKS wordings, newest last: the first ones dropped out.
    assert procedure.tasks == tuple(f"compile sources variant{i}" for i in range(2, 10))
    assert {"compile", "sources", "variant9"} <= set(procedure.row().terms)
    assert procedure.goal == "build repo"  # the id's task is still the one it was learned on
