"""Experience memory (#21) phase 1: recorder, stores, learner and recall_experience tool, without the actor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiden.experience.episodes import Episode, EpisodeRecorder
from aiden.experience.episodestore import EpisodeStore
from aiden.experience.extension import handle_experience_tool
from aiden.experience.learner import learn
from aiden.experience.records import ExperienceRecord
from aiden.experience.recordstore import RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ENV = "repo-acme"
GOAL = "build the acme repo"


class Crash(BaseException):
    """A simulated process death at a named crash point (not an Exception: no cleanup path runs)."""


class CrashAt(Storage):
    def __init__(self, point: str) -> None:
        super().__init__()
        self.point = point

    def checkpoint(self, name: str) -> None:
        if name == self.point:
            raise Crash(name)


def failing_then_working(episode_id: str, t: float) -> Episode:
    rec = EpisodeRecorder(episode_id, goal=GOAL, environment=ENV, started_at=t)
    rec.observe("python", "3.11.9")
    rec.tool_call("shell", json.dumps({"cmd": "make build"}), call_id="c1")
    rec.tool_result("shell", "error: missing flag WITH_SSL", ok=False, call_id="c1")
    rec.tool_call("shell", json.dumps({"cmd": "make build WITH_SSL=1"}), call_id="c2")
    rec.tool_result("shell", "build ok", ok=True, call_id="c2")
    return rec.finish("success", finished_at=t + 10)


def contradicting(episode_id: str, t: float) -> Episode:
    rec = EpisodeRecorder(episode_id, goal=GOAL, environment=ENV, started_at=t)
    rec.tool_call("shell", json.dumps({"cmd": "make build WITH_SSL=1"}), call_id="c1")
    rec.tool_result("shell", "error: WITH_SSL is no longer supported", ok=False, call_id="c1")
    return rec.finish("failure", finished_at=t + 10)


def process(episodes: EpisodeStore, records: RecordStore) -> int:
    done = 0
    for row in episodes.pending():
        episode = episodes.load(row)
        assert episode is not None
        lessons = learn(episode, records.records(environment=episode.environment))
        records.apply(lessons.records)
        if lessons.profile is not None:
            records.save_profile(lessons.profile)
        episodes.mark_processed(row, {"records": [r.id for r in lessons.records]})
        done += 1
    return done


def search_of(records: RecordStore, now: float):  # type: ignore[no-untyped-def]
    async def search(query: str, env: str | None, kinds: list[str] | None, k: int) -> list[ExperienceRecord]:
        from aiden.experience.records import terms_of

        return records.search(terms_of(query), now=now, k=k, environment=env, kinds=kinds)

    return search


async def test_failing_then_working_yields_failure_and_procedure_citing_evidence(tmp_path: Path) -> None:
    lay, storage = Layout(tmp_path), Storage()
    episodes, records = EpisodeStore(lay, storage), RecordStore(lay, storage)
    assert episodes.commit(failing_then_working("ep-1", 1000.0), now=1011.0) is True
    assert process(episodes, records) == 1
    got = {r.kind: r for r in records.records()}
    assert sorted(got) == ["fact", "failure", "procedure"]
    assert got["failure"].step == "shell make build"
    assert "missing flag WITH_SSL" in got["failure"].body
    assert got["procedure"].step == "shell make build WITH_SSL=1"
    for record in (got["failure"], got["procedure"]):
        assert record.status == "active"
        assert [(e.episode_id, e.seqs) for e in record.evidence] == [("ep-1", (2, 3, 4, 5))]
    # The observation is a fact of the environment citing its own event, and stays in the profile too.
    assert (got["fact"].title, got["fact"].status, got["fact"].environment) == (
        "python: 3.11.9",
        "active",
        ENV,
    )
    assert [(e.episode_id, e.seqs) for e in got["fact"].evidence] == [("ep-1", (1,))]
    profile = records.profile(ENV)
    assert profile is not None and profile.observations == {"python": "3.11.9"}
    assert process(episodes, records) == 0  # processed exactly once


async def test_contradicting_episode_disputes_the_procedure_and_recall_stops_returning_it(
    tmp_path: Path,
) -> None:
    lay, storage = Layout(tmp_path), Storage()
    episodes, records = EpisodeStore(lay, storage), RecordStore(lay, storage)
    episodes.commit(failing_then_working("ep-1", 1000.0), now=1011.0)
    process(episodes, records)
    before = await handle_experience_tool(
        {"query": "build acme", "kinds": ["procedure"]}, search=search_of(records, 2000.0), environment=ENV
    )
    (proc,) = [r for r in records.records() if r.kind == "procedure"]
    assert before.ids == [proc.id]
    assert "verify against current observations" in json.loads(before.text)["note"]
    episodes.commit(contradicting("ep-2", 3000.0), now=3011.0)
    process(episodes, records)
    (proc,) = [r for r in records.records() if r.kind == "procedure"]
    assert proc.status == "disputed"
    assert proc.status_reason == "episode ep-2 seqs [1, 2]: the step failed"
    after = await handle_experience_tool(
        {"query": "build acme", "kinds": ["procedure"]}, search=search_of(records, 4000.0), environment=ENV
    )
    assert after.ids == []


async def test_a_newer_working_procedure_makes_the_old_one_legacy(tmp_path: Path) -> None:
    lay, storage = Layout(tmp_path), Storage()
    episodes, records = EpisodeStore(lay, storage), RecordStore(lay, storage)
    episodes.commit(failing_then_working("ep-1", 1000.0), now=1011.0)
    rec = EpisodeRecorder("ep-2", goal=GOAL, environment=ENV, started_at=3000.0)
    rec.tool_call("shell", '{"cmd": "make build WITH_SSL=1"}')
    rec.tool_result("shell", "error: unknown flag", ok=False)
    rec.tool_call("shell", '{"cmd": "make build TLS=1"}')
    rec.tool_result("shell", "ok", ok=True)
    episodes.commit(rec.finish("success", finished_at=3010.0), now=3011.0)
    process(episodes, records)
    status = {r.step: r.status for r in records.records() if r.kind == "procedure"}
    assert status == {"shell make build WITH_SSL=1": "legacy", "shell make build TLS=1": "active"}


async def test_expired_records_are_never_returned_nor_opened(tmp_path: Path) -> None:
    lay, storage = Layout(tmp_path), Storage()
    records = RecordStore(lay, storage)
    mk = [
        ExperienceRecord(
            id=f"proc-{i}",
            kind="procedure",
            status="active",
            title=f"build acme {i}",
            body="use make",
            environment=ENV,
            created_at=1.0,
            updated_at=1.0,
            expires_at=100.0 if i % 2 else None,
        )
        for i in range(4)
    ]
    records.apply(mk)
    records.files_read.clear()
    answer = await handle_experience_tool(
        {"query": "build acme"}, search=search_of(records, 500.0), environment=ENV
    )
    assert sorted(answer.ids) == ["proc-0", "proc-2"]
    assert sorted(records.files_read) == ["proc-0", "proc-2"]


async def test_the_five_result_and_4800_char_cap(tmp_path: Path) -> None:
    lay, storage = Layout(tmp_path), Storage()
    records = RecordStore(lay, storage)
    records.apply(
        [
            ExperienceRecord(
                id=f"proc-{i}",
                kind="procedure",
                status="active",
                title=f"build acme {i}",
                body="word " * 400,
                environment=ENV,
                created_at=1.0,
                updated_at=1.0,
            )
            for i in range(8)
        ]
    )
    answer = await handle_experience_tool({"query": "build acme"}, search=search_of(records, 5.0))
    assert len(answer.text) <= 4800
    assert len(answer.ids) == 3  # two whole bodies of ~2000 chars, the third cut to fit
    assert [r["id"] for r in json.loads(answer.text)["results"]] == answer.ids
    small = RecordStore(Layout(tmp_path / "b"), storage)
    small.apply(
        [
            ExperienceRecord(
                id=f"proc-{i}",
                kind="procedure",
                status="active",
                title=f"build acme {i}",
                body="use make",
                environment=ENV,
                created_at=1.0,
                updated_at=1.0,
            )
            for i in range(8)
        ]
    )
    answer = await handle_experience_tool({"query": "build acme", "k": 5}, search=search_of(small, 5.0))
    assert len(answer.ids) == 5
    bad = await handle_experience_tool('{"query": "x", "k": 9}', search=search_of(small, 5.0))
    assert (json.loads(bad.text), bad.ids) == ({"error": "k must be between 1 and 5, got 9"}, [])
    assert json.loads((await handle_experience_tool("{nope", search=search_of(small, 5.0))).text)["error"]


async def test_returned_ids_are_recorded_on_the_episode(tmp_path: Path) -> None:
    lay, storage = Layout(tmp_path), Storage()
    episodes = EpisodeStore(lay, storage)
    rec = EpisodeRecorder("ep-9", goal=GOAL, environment=ENV, started_at=1.0)
    rec.note_recalled(["proc-a", "proc-b"])
    rec.note_recalled(["proc-a"])
    episodes.commit(rec.finish("unknown", finished_at=2.0), now=2.0)
    got = episodes.get("ep-9")
    assert got is not None and got.recalled == ("proc-a", "proc-b")


async def test_automatic_learning_never_writes_a_preference(tmp_path: Path) -> None:
    lay, storage = Layout(tmp_path), Storage()
    episodes, records = EpisodeStore(lay, storage), RecordStore(lay, storage)
    rec = EpisodeRecorder("ep-1", goal="install deps", environment=ENV, started_at=1.0)
    rec.correction("I prefer yarn, always use yarn, never npm")
    rec.tool_call("shell", '{"cmd": "npm install"}')
    rec.tool_result("shell", "npm ERR!", ok=False)
    rec.tool_call("shell", '{"cmd": "yarn install"}')
    rec.tool_result("shell", "done", ok=True)
    rec.answer("installed")
    episodes.commit(rec.finish("success", finished_at=5.0), now=5.0)
    process(episodes, records)
    assert {r.kind for r in records.records()} == {"failure", "procedure"}
    # The stated preference is in no record: learning rests on the tool results alone.
    assert not [r.id for r in records.records() if "prefer" in f"{r.title} {r.body} {' '.join(r.tasks)}"]
    # Nothing outside the episode and experience stores: no long-term entry, no profile.
    assert sorted(p.name for p in lay.memory.iterdir()) == ["episodes", "experience"]


@pytest.mark.parametrize("point", ["experience.commit.after_file", "experience.commit.after_index"])
async def test_crash_during_commit_loses_no_committed_episode(tmp_path: Path, point: str) -> None:
    lay = Layout(tmp_path)
    episode = failing_then_working("ep-1", 1000.0)
    with pytest.raises(Crash):
        EpisodeStore(lay, CrashAt(point)).commit(episode, now=1011.0)
    fresh = EpisodeStore(lay, Storage())
    # after_file: not acknowledged, the retry commits it; after_index: committed, the retry is a no-op.
    assert fresh.commit(episode, now=1012.0) is (point == "experience.commit.after_file")
    assert [r.id for r in fresh.rows()] == ["ep-1"]
    assert fresh.get("ep-1") == episode


@pytest.mark.parametrize("point", ["experience.records.after_files", "experience.records.after_index"])
async def test_crash_during_processing_duplicates_no_record(tmp_path: Path, point: str) -> None:
    lay = Layout(tmp_path)
    EpisodeStore(lay, Storage()).commit(failing_then_working("ep-1", 1000.0), now=1011.0)
    with pytest.raises(Crash):
        process(EpisodeStore(lay, Storage()), RecordStore(lay, CrashAt(point)))
    episodes, records = EpisodeStore(lay, Storage()), RecordStore(lay, Storage())
    assert process(episodes, records) == 1
    assert process(episodes, records) == 0
    assert sorted(r.kind for r in records.records()) == ["fact", "failure", "procedure"]
    assert all(len(r.evidence) == 1 for r in records.records())


async def test_learning_leaves_expired_records_unread_and_relearns_them_fresh(tmp_path: Path) -> None:
    from aiden.config import Config
    from aiden.experience.records import goal_key, record_id
    from aiden.experience.service import ExperienceService

    svc = ExperienceService(Layout(tmp_path), Storage(), Config())
    pid = record_id("procedure", ENV, goal_key(GOAL), "shell make build WITH_SSL=1")
    stale = ExperienceRecord(
        id=pid,
        kind="procedure",
        status="active",
        title="old",
        body="old text",
        environment=ENV,
        goal=goal_key(GOAL),
        step="shell make build WITH_SSL=1",
        created_at=1.0,
        updated_at=1.0,
        expires_at=500.0,
    )
    svc.records.apply([stale])
    svc.commit(failing_then_working("ep-1", 1000.0), now=1011.0)
    assert svc.learn(16).episodes == 1
    assert svc.records.files_read == []  # the expired row was rejected before its file
    (proc,) = [r for r in svc.all_records() if r.kind == "procedure"]
    assert (proc.id, proc.created_at, proc.expires_at, [e.episode_id for e in proc.evidence]) == (
        pid,
        1010.0,
        None,
        ["ep-1"],
    )


async def test_recall_weighs_the_task_a_record_serves_above_its_step_text(tmp_path: Path) -> None:
    records = RecordStore(Layout(tmp_path), Storage())

    def proc(rid: str, goal: str, step: str, t: float) -> ExperienceRecord:
        return ExperienceRecord(
            id=rid,
            kind="procedure",
            status="active",
            title=goal,
            body="worked",
            environment=ENV,
            goal=goal,
            step=step,
            created_at=t,
            updated_at=t,
        )

    # Same number of terms each; "tests" is the first one's task, "check" only the second one's step.
    records.apply(
        [
            proc("proc-tests", "acme tests", "shell pytest", 1.0),
            proc("proc-lint", "acme lint", "shell check", 2.0),
        ]
    )
    found = records.search(("check", "acme", "tests"), now=5.0, k=5, environment=ENV)
    assert [r.id for r in found] == ["proc-tests", "proc-lint"]


def test_the_tool_description_says_recalled_experience_is_a_hint_to_verify() -> None:
    from aiden.experience.extension import EXPERIENCE_TOOL

    description = EXPERIENCE_TOOL["function"]["description"]
    assert "a hint to verify against current observations and tool results, not state" in description
    assert "where things are (navigation" in description  # every kind learning makes is named
    assert EXPERIENCE_TOOL["function"]["parameters"]["required"] == ["query"]  # no forced fields, no router
