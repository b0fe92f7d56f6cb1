"""The experience learner's direct-evidence rules beyond fail-then-fix (#21): a run that completed its goal
at the first try teaches its step as a procedure, an observation is a fact, evidence stays bounded."""

from __future__ import annotations

import json

from aiden.experience.episodes import Episode, EpisodeRecorder, Outcome
from aiden.experience.learner import assess, learn
from aiden.experience.records import MAX_EVIDENCE, ExperienceRecord

GOAL = "lint the repo"


def run(
    eid: str,
    t: float,
    steps: list[tuple[str, bool]],
    *,
    goal: str = GOAL,
    answered: bool = True,
    outcome: Outcome = "unknown",
    correction: str = "",
) -> Episode:
    rec = EpisodeRecorder(eid, goal=goal, environment="a", started_at=t)
    if correction:
        rec.correction(correction)
    for n, (cmd, ok) in enumerate(steps):
        rec.tool_call("shell", json.dumps({"cmd": cmd}), call_id=f"c{n}")
        rec.tool_result("shell", "All checks passed!" if ok else f"error: {cmd}", ok=ok, call_id=f"c{n}")
    if answered:
        rec.answer("Lint is clean.")
    return rec.finish(outcome, finished_at=t + 10)


def apply(store: dict[str, ExperienceRecord], episode: Episode) -> tuple[ExperienceRecord, ...]:
    lessons = learn(episode, list(store.values()))
    for record in lessons.records:
        store[record.id] = record
    return lessons.records


def test_a_first_try_success_teaches_its_step_citing_the_call_the_result_and_the_answer() -> None:
    episode = run("ep-1", 0.0, [("ruff check src", True)])
    assert assess(episode) == "success"
    lessons = learn(episode, [])
    (procedure,) = lessons.records
    assert (procedure.kind, procedure.status, procedure.step, procedure.goal) == (
        "procedure",
        "active",
        "shell ruff check src",
        "lint repo",
    )
    assert [(e.episode_id, e.seqs) for e in procedure.evidence] == [("ep-1", (1, 2, 3))]
    assert procedure.body == (
        "For 'lint the repo', `shell ruff check src` completed the task at the first try (output: All "
        "checks passed!). Verify against current observations before relying on it."
    )
    assert lessons.groups == ()  # nothing for a model to phrase: no failure beside it
    # The same step retried within the run is still one step.
    again = learn(run("ep-2", 0.0, [("ruff check src", True), ("ruff check src", True)]), [])
    assert [(r.step, r.evidence[0].seqs) for r in again.records] == [("shell ruff check src", (3, 4, 5))]


def test_no_first_try_procedure_without_direct_evidence_of_completion() -> None:
    cases = {
        "the run never answered (abandoned, closed)": run(
            "ep-1", 0.0, [("ruff check src", True)], answered=False
        ),
        "the caller recorded a failure": run("ep-2", 0.0, [("ruff check src", True)], outcome="failure"),
        "a correction may have changed the task": run(
            "ep-3", 0.0, [("ruff check src", True)], correction="no, lint the docs"
        ),
        "two different steps: which one did the work?": run(
            "ep-4", 0.0, [("cd src", True), ("ruff check", True)]
        ),
        "the step failed": run("ep-5", 0.0, [("ruff check src", False)]),
        "no step at all": run("ep-6", 0.0, []),
    }
    for why, episode in cases.items():
        assert learn(episode, []).records == (), why
    assert assess(cases["the run never answered (abandoned, closed)"]) == "unknown"
    assert assess(cases["the step failed"]) == "failure"


def test_a_first_try_success_confirms_a_known_step_instead_of_duplicating_it_and_supersedes_nothing() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, run("ep-1", 0.0, [("ruff check", False), ("ruff check src", True)]))
    (learned,) = (r for r in store.values() if r.kind == "procedure")
    # Another wording of the task, the known step at the first try: the record gains the episode.
    apply(store, run("ep-2", 100.0, [("ruff check src", True)], goal="check the code style"))
    assert [r.id for r in store.values() if r.kind == "procedure"] == [learned.id]
    assert [e.episode_id for e in store[learned.id].evidence] == ["ep-1", "ep-2"]
    assert store[learned.id].tasks == (GOAL, "check the code style")
    # A different step that also works for the same task: a second procedure, the first stays active.
    apply(store, run("ep-3", 200.0, [("make lint", True)]))
    assert sorted((r.step, r.status) for r in store.values() if r.kind == "procedure") == [
        ("shell make lint", "active"),
        ("shell ruff check src", "active"),
    ]
    # Re-learning the last episode (a retried worker) changes nothing.
    assert apply(store, run("ep-3", 200.0, [("make lint", True)])) == ()


def test_a_first_try_procedure_is_disputed_when_its_step_fails_later() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, run("ep-1", 0.0, [("ruff check src", True)]))
    apply(store, run("ep-2", 100.0, [("ruff check src", False)]))
    ((status, reason),) = [(r.status, r.status_reason) for r in store.values()]
    assert (status, reason) == ("disputed", "episode ep-2 seqs [1, 2]: the step failed")


def observed(eid: str, t: float, **values: str) -> Episode:
    rec = EpisodeRecorder(eid, goal="inspect the repo", environment="a", started_at=t)
    for key, value in values.items():
        rec.observe(key, value)
    return rec.finish("unknown", finished_at=t + 10)


def test_an_observation_is_a_fact_updated_in_place_when_the_value_changes() -> None:
    store: dict[str, ExperienceRecord] = {}
    (fact,) = apply(store, observed("ep-1", 0.0, python="3.11.9"))
    assert (fact.kind, fact.title, fact.step, fact.goal, fact.environment) == (
        "fact",
        "python: 3.11.9",
        "python",
        "",
        "a",
    )
    assert [(e.episode_id, e.seqs) for e in fact.evidence] == [("ep-1", (1,))]
    # Seen again with the same value: one more piece of evidence.
    apply(store, observed("ep-2", 100.0, python="3.11.9", node="22"))
    assert [e.episode_id for e in store[fact.id].evidence] == ["ep-1", "ep-2"]
    # A new value replaces the old one in place: its evidence is about the new value only.
    apply(store, observed("ep-3", 200.0, python="3.12.1"))
    now = store[fact.id]
    assert (now.title, now.status, now.status_reason, now.created_at) == (
        "python: 3.12.1",
        "active",
        "was `3.11.9` until episode ep-3",
        10.0,
    )
    assert [e.episode_id for e in now.evidence] == ["ep-3"]
    # An older episode learned late does not put the old value back.
    assert apply(store, observed("ep-0", 50.0, python="3.10.0")) == ()
    assert len(store) == 2  # python and node: one record per key
    # Re-learning (a retried worker) changes nothing.
    assert apply(store, observed("ep-3", 200.0, python="3.12.1")) == ()
    assert learn(observed("ep-4", 300.0, python="3.12.1"), list(store.values())).groups == ()


def test_evidence_keeps_the_first_episode_and_the_newest_ones() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, run("ep-0", 0.0, [("ruff check", False), ("ruff check src", True)]))
    for i in range(1, 30):
        apply(store, run(f"ep-{i}", 100.0 * i, [("ruff check src", True)]))
    (procedure,) = (r for r in store.values() if r.kind == "procedure")
    cited = [e.episode_id for e in procedure.evidence]
    assert len(cited) == MAX_EVIDENCE
    assert cited == ["ep-0", *(f"ep-{i}" for i in range(30 - MAX_EVIDENCE + 1, 30))]


def tap(rec: EpisodeRecorder, n: int, args: dict[str, object], ok: bool) -> None:
    rec.tool_call("tap", json.dumps(args), call_id=f"t{n}")
    rec.tool_result(
        "tap", "opened Settings" if ok else "error: nothing at that point", ok=ok, call_id=f"t{n}"
    )


def test_a_fix_that_changed_only_numbers_is_a_calibration_and_lives_like_a_procedure() -> None:
    rec = EpisodeRecorder("ep-1", goal="open settings", environment="phone", started_at=0.0)
    tap(rec, 0, {"x": 130, "y": 200, "label": "Settings"}, False)
    tap(rec, 1, {"x": 142.5, "y": 200, "label": "Settings"}, True)
    lessons = learn(rec.finish("success", finished_at=10.0), [])
    by_kind = {r.kind: r for r in lessons.records}
    assert sorted(by_kind) == ["calibration", "failure"]
    calibration = by_kind["calibration"]
    assert calibration.step == 'tap {"label":"Settings","x":142.5,"y":200}'
    assert calibration.body == (
        'For \'open settings\', `tap {"label":"Settings","x":142.5,"y":200}` worked (output: opened '
        'Settings) after `tap {"label":"Settings","x":130,"y":200}` failed (only `x` changed). '
        "Verify against current observations before relying on it."
    )
    assert [(e.episode_id, e.seqs) for e in calibration.evidence] == [("ep-1", (1, 2, 3, 4))]
    assert [g.procedure_id for g in lessons.groups] == [calibration.id]  # a model may word it too
    # Disputed when its step fails later, like a procedure.
    later = EpisodeRecorder("ep-2", goal="open settings", environment="phone", started_at=100.0)
    tap(later, 0, {"x": 142.5, "y": 200, "label": "Settings"}, False)
    (disputed,) = learn(later.finish("failure", finished_at=110.0), list(lessons.records)).records
    assert (disputed.id, disputed.status) == (calibration.id, "disputed")


def test_a_fix_that_changed_anything_but_numbers_stays_a_procedure() -> None:
    for before, after in (
        ({"x": 130, "label": "Settings"}, {"x": 140, "label": "Preferences"}),  # a string changed too
        ({"x": 130}, {"x": 130, "double": True}),  # an argument added
        ({"x": 130, "fast": True}, {"x": 130, "fast": False}),  # a flag, not a number
    ):
        rec = EpisodeRecorder("ep-1", goal="open settings", environment="phone", started_at=0.0)
        tap(rec, 0, before, False)
        tap(rec, 1, after, True)
        kinds = sorted(r.kind for r in learn(rec.finish("success", finished_at=10.0), []).records)
        assert kinds == ["failure", "procedure"], (before, after)


def test_an_output_between_calls_is_not_the_answer() -> None:
    from aiden.experience.episodes import answer_after

    rec = EpisodeRecorder("ep-1", goal=GOAL, environment="a", started_at=0.0)
    rec.tool_call("shell", json.dumps({"cmd": "ruff check"}), call_id="c0")
    rec.tool_result("shell", "error: no config", ok=False, call_id="c0")
    rec.answer("Let me try with the path.")  # the run goes on: not its answer
    rec.tool_call("shell", json.dumps({"cmd": "ruff check src"}), call_id="c1")
    rec.tool_result("shell", "All checks passed!", ok=True, call_id="c1")
    episode = rec.finish("unknown", finished_at=10.0)
    assert answer_after(episode, 2) is None
    assert assess(episode) == "unknown"  # it worked, but the run never answered after it
