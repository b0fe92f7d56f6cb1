"""Experience memory (#21), the LLM learner path: one call per learned group against the local fake
OpenAI-compatible server, tolerant reading, and the embedded text kept on any model failure."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.config import Config
from aiden.errors import InvalidSummaryError
from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeRecorder
from aiden.experience.learner import learn
from aiden.experience.llmlearner import LLMLearner, Phrasing, build_messages, parse_phrasing
from aiden.experience.messages import LearnerStats
from aiden.experience.records import ExperienceRecord
from aiden.experience.service import ExperienceService
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(60)]

ENV = "repo-acme"
GOAL = "build the acme repo"
ANSWER = {
    "procedure": "Build acme with make build WITH_SSL=1: the build needs the SSL flag.",
    "failure": "Plain make build fails: missing flag WITH_SSL.",
}


@pytest.fixture(scope="module")
def litellm_ready() -> None:
    """Import litellm once for this module, outside any test's deadline (it takes seconds)."""
    from aiden.summarizers.llm.client import _import_litellm

    _import_litellm()


def fail_then_fix(episode_id: str, t: float, goal: str = GOAL, flag: str = "WITH_SSL=1") -> Episode:
    rec = EpisodeRecorder(episode_id, goal=goal, environment=ENV, started_at=t)
    rec.tool_call("shell", json.dumps({"cmd": "make build"}), call_id="c1")
    rec.tool_result("shell", "error: missing flag WITH_SSL", ok=False, call_id="c1")
    rec.tool_call("shell", json.dumps({"cmd": f"make build {flag}"}), call_id="c2")
    rec.tool_result("shell", "build ok", ok=True, call_id="c2")
    return rec.finish("success", finished_at=t + 10)


def just_works(episode_id: str, t: float) -> Episode:
    rec = EpisodeRecorder(episode_id, goal=GOAL, environment=ENV, started_at=t)
    rec.tool_call("shell", json.dumps({"cmd": "make build WITH_SSL=1"}), call_id="c1")
    rec.tool_result("shell", "build ok", ok=True, call_id="c1")
    return rec.finish("success", finished_at=t + 10)


def service(root: Path, server: FakeLLMServer | None) -> ExperienceService:
    learner = (
        None
        if server is None
        else LLMLearner("openai/test-model", api_base=server.base_url, api_key="sk-test", timeout_s=20)
    )
    return ExperienceService(Layout(root), Storage(), Config(), learner=learner)


async def learn_all(svc: ExperienceService, *episodes: Episode) -> list[ExperienceRecord]:
    for episode in episodes:
        svc.commit(episode, now=episode.finished_at)
    await anyio.to_thread.run_sync(svc.learn, 16)
    return sorted(svc.all_records(), key=lambda r: r.kind)


def embedded_bodies(*episodes: Episode) -> dict[str, str]:
    records: dict[str, ExperienceRecord] = {}
    for episode in episodes:
        for record in learn(episode, list(records.values())).records:
            records[record.id] = record
    return {r.kind: r.body for r in records.values()}


# --- reading answers (pure) ----------------------------------------------------------------


def test_parse_reads_json_fenced_prose_yaml_and_lines() -> None:
    want = Phrasing(procedure="Use the flag.", failure="Plain build fails.")
    assert parse_phrasing('{"procedure": "Use the flag.", "failure": "Plain build fails."}') == want
    assert (
        parse_phrasing('```json\n{"procedure": "Use the flag.", "failure": "Plain build fails."}\n```')
        == want
    )
    assert (
        parse_phrasing('Sure! {"procedure": "Use the flag.",\n "failure": "Plain build fails."} Done.')
        == want
    )
    assert parse_phrasing("procedure: Use the flag.\nfailure: Plain build fails.") == want
    assert parse_phrasing("**Procedure**: Use the flag.\n- **Failure** - Plain build fails.") == want
    assert parse_phrasing('{"Procedure": ["Use", "the flag."], "what_failed": "Plain build fails."}') == want
    assert parse_phrasing('{"procedure": "Use the flag."}') == Phrasing(procedure="Use the flag.", failure="")


def test_parse_cuts_a_long_note() -> None:
    got = parse_phrasing(json.dumps({"procedure": "word " * 400, "failure": "x"}))
    assert len(got.procedure) == 600 and got.procedure.endswith(" ...")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("The build is fine now.", "no procedure note"),
        ('{"failure": "Plain build fails."}', "no procedure note"),
        ('{"procedure": "   "}', "no procedure note"),
        ('{"procedure": "I cannot help with that."}', "refusal"),
        ("x" * 9000, "runaway"),
        ("[" * 3000 + "]" * 3000, "no procedure note"),  # deeper than Python recurses
    ],
)
def test_parse_refuses_what_has_no_usable_procedure(answer: str, reason: str) -> None:
    with pytest.raises(InvalidSummaryError, match=reason):
        parse_phrasing(answer)


def test_prompt_carries_only_the_episode_evidence() -> None:
    lessons = learn(fail_then_fix("ep-1", 1000.0), [])
    assert len(lessons.groups) == 1
    messages = build_messages(lessons.groups[0])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == (
        "Task: build the acme repo\nEnvironment: repo-acme\n"
        "Failed:\n- `shell make build` failed with: error: missing flag WITH_SSL\n"
        "Worked: `shell make build WITH_SSL=1` (output: build ok)"
    )


def test_from_summarizer_uses_the_llm_summarizer_model_only() -> None:
    config = Config(summarizer_timeout_s=7.0)
    summarizer = LiteLLMSummarizer("openai/m", config=config, api_base="http://x/v1", api_key="k")
    learner = LLMLearner.from_summarizer(summarizer)
    assert learner is not None
    assert (learner.model, learner.api_base, learner.api_key, learner.timeout_s) == (
        "openai/m",
        "http://x/v1",
        "k",
        7.0,
    )
    assert LLMLearner.from_summarizer(ExtractiveSummarizer()) is None
    assert LLMLearner.from_summarizer(None) is None


# --- against the fake OpenAI-compatible server ------------------------------------------------


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_one_call_per_group_phrases_procedure_and_failure(tmp_path: Path) -> None:
    episode = fail_then_fix("ep-1", 1000.0)
    with FakeLLMServer(script=[json.dumps(ANSWER)]) as server:
        svc = service(tmp_path, server)
        failure, procedure = await learn_all(svc, episode)
        requests = server.requests
    assert len(requests) == 1
    assert requests[0].body["messages"][1]["content"].startswith("Task: build the acme repo\n")
    assert (procedure.kind, procedure.source, failure.kind, failure.source) == (
        "procedure",
        "llm",
        "failure",
        "llm",
    )
    assert procedure.body == (
        "Build acme with make build WITH_SSL=1: the build needs the SSL flag.\n\n"
        "Step: `shell make build WITH_SSL=1` (worked in episode ep-1 after `shell make build` failed). "
        "Verify against current observations before relying on it."
    )
    assert failure.body == (
        "Plain make build fails: missing flag WITH_SSL.\n\n"
        "Failed step: `shell make build`. What worked instead: `shell make build WITH_SSL=1`."
    )
    # Ids, evidence and status are the embedded learner's, whatever the model wrote.
    embedded = {r.id: r for r in learn(episode, []).records}
    assert {r.id for r in (failure, procedure)} == set(embedded)
    assert procedure.evidence == embedded[procedure.id].evidence
    stats = svc.learner_stats()
    assert stats is not None
    assert (stats.groups, stats.calls, stats.phrased, stats.fallbacks) == (1, 1, 1, 0)
    assert stats.prompt_tokens > 0 and stats.completion_tokens > 0
    # Recall finds the phrased procedure first.
    found = svc.search("how do I build acme", ENV, None, 5, now=2000.0)
    assert [r.id for r in found] == [procedure.id, failure.id]


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_an_episode_that_teaches_nothing_new_costs_no_call(tmp_path: Path) -> None:
    with FakeLLMServer(script=[json.dumps(ANSWER)]) as server:
        svc = service(tmp_path, server)
        await learn_all(svc, fail_then_fix("ep-1", 1000.0))
        records = await learn_all(svc, just_works("ep-2", 2000.0))
        assert len(server.requests) == 1
    procedure = next(r for r in records if r.kind == "procedure")
    assert [e.episode_id for e in procedure.evidence] == ["ep-1", "ep-2"]
    assert procedure.source == "llm"


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_malformed_reply_falls_back_to_embedded_text_counted_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = fail_then_fix("ep-1", 1000.0)
    second = fail_then_fix("ep-2", 3000.0, goal="deploy the acme service", flag="WITH_TLS=1")
    caplog.set_level(logging.DEBUG, logger="aiden.experience")
    with FakeLLMServer(script=["Sure, the build works now!", {"content": ""}]) as server:
        svc = service(tmp_path, server)
        records = await learn_all(svc, first, second)
        assert len(server.requests) == 2
    assert [r.source for r in records] == ["embedded"] * 4
    want = sorted([*learn(first, []).records, *learn(second, []).records], key=lambda r: r.id)
    assert sorted(records, key=lambda r: r.id) == want
    assert svc.learner_stats() == LearnerStats(
        groups=2,
        calls=2,
        fallbacks=2,
        malformed=2,
        prompt_tokens=svc.learner_stats().prompt_tokens,  # type: ignore[union-attr]
        completion_tokens=svc.learner_stats().completion_tokens,  # type: ignore[union-attr]
        first_error="InvalidSummaryError: learner answer has no procedure note",
        last_error="InvalidSummaryError: learner returned an empty message",
    )
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "LLM learner failed, the embedded lesson text is kept "
        "(InvalidSummaryError: learner answer has no procedure note)"
    ]


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_server_errors_fall_back_and_open_the_breaker(tmp_path: Path) -> None:
    tasks = ("build alpha", "build bravo", "build charlie", "build delta", "build echo")
    episodes = [
        fail_then_fix(f"ep-{i}", 1000.0 * (i + 1), goal=t, flag=f"F{i}=1") for i, t in enumerate(tasks)
    ]
    with FakeLLMServer(responder=lambda body: {"status": 400, "error": "bad model"}) as server:
        svc = service(tmp_path, server)
        records = await learn_all(svc, *episodes)
        # Three failed calls open the breaker: the last two groups cost no request.
        assert len(server.requests) == 3
    assert len(records) == 10 and {r.source for r in records} == {"embedded"}
    stats = svc.learner_stats()
    assert stats is not None
    assert (stats.groups, stats.calls, stats.fallbacks, stats.malformed) == (5, 3, 5, 0)
    assert stats.first_error.startswith("SummarizerError: summarizer request rejected")
    assert stats.last_error.startswith("SummarizerUnavailable: summarizer circuit breaker is open")


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_a_trial_that_fails_with_no_summarizer_error_still_ends() -> None:
    group = learn(fail_then_fix("ep-1", 1000.0), []).groups[0]
    # A group built wrong (a bug upstream): its prompt cannot be built, which is no SummarizerError.
    broken = dataclasses.replace(group, failed=(("shell make build",),))  # type: ignore[arg-type]
    with FakeLLMServer(script=[{"status": 400}, json.dumps(ANSWER)]) as server:
        learner = LLMLearner(
            "openai/test-model",
            api_base=server.base_url,
            api_key="sk-test",
            breaker_failures=1,
            breaker_reset_s=0.01,
        )
        assert await learner.phrase_or_none(group) is None  # the breaker opens
        await anyio.sleep(0.02)
        with pytest.raises(ValueError):
            await learner.phrase_or_none(broken)  # the half-open trial
        assert learner.stats().last_error.startswith("ValueError: ")
        # No word on the provider: the trial is released, the next call goes out at once.
        assert await learner.phrase(group) == Phrasing(ANSWER["procedure"], ANSWER["failure"])
        assert len(server.requests) == 2


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_relearning_after_a_crash_rewords_but_never_duplicates(tmp_path: Path) -> None:
    episode = fail_then_fix("ep-1", 1000.0)
    other = {"procedure": "Pass WITH_SSL=1 to make build.", "failure": "make build alone fails."}
    with FakeLLMServer(script=[json.dumps(ANSWER), json.dumps(other)]) as server:
        svc = service(tmp_path, server)
        first = await learn_all(svc, episode)
        # The processed marker was lost (a crash after the records were committed): the pass runs again.
        (row,) = svc.episodes.rows()
        (svc.episodes.episode_dir(row.id, row.year) / "processed").unlink()
        second = await learn_all(svc)
    assert [r.id for r in second] == [r.id for r in first]
    assert second[1].body.startswith("Pass WITH_SSL=1 to make build.")


# --- wired through open_memory ----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.usefixtures("litellm_ready")
async def test_open_memory_with_an_llm_summarizer_words_lessons_with_its_model(tmp_path: Path) -> None:
    quiet = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
    with FakeLLMServer(script=[json.dumps(ANSWER)]) as server:
        summarizer = LiteLLMSummarizer("openai/test-model", api_base=server.base_url, api_key="sk-test")
        async with aiden.open_memory(tmp_path / "llm", config=quiet, summarizer=summarizer) as memory:
            await memory.begin_run(GOAL, environment=ENV)
            for call_id, cmd, out in (
                ("c1", "make build", "error: missing flag WITH_SSL"),
                ("c2", "make build WITH_SSL=1", "build ok"),
            ):
                await memory.append(
                    SessionEvent(
                        type="tool_call",
                        tool_name="shell",
                        tool_call_id=call_id,
                        tool_args=json.dumps({"cmd": cmd}),
                    )
                )
                await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=out))
            await memory.commit_run("built it", outcome="success")
            outcome = await memory.learn_experience()
            records = {r.kind: r for r in await memory.experience_records()}
        assert [r.body["model"] for r in server.requests] == ["test-model"]
    assert outcome.learner is not None
    assert (outcome.learner.groups, outcome.learner.calls, outcome.learner.phrased) == (1, 1, 1)
    assert records["procedure"].body.startswith(ANSWER["procedure"])
    assert records["failure"].body.startswith(ANSWER["failure"])
    assert {r.source for r in records.values()} == {"llm"}


@pytest.mark.anyio
async def test_the_embedded_summarizer_learns_without_any_model(tmp_path: Path) -> None:
    quiet = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
    async with aiden.open_memory(tmp_path, config=quiet) as memory:
        await memory.begin_run(GOAL, environment=ENV)
        await memory.append(
            SessionEvent(type="tool_call", tool_name="shell", tool_call_id="c1", tool_args="{}")
        )
        await memory.append(SessionEvent(type="tool_result", tool_call_id="c1", content="ok"))
        await memory.commit_run("done", outcome="success")
        outcome = await memory.learn_experience()
    assert (outcome.episodes, outcome.learner) == (1, None)
