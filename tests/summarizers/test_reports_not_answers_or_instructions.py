"""What the session summary files as a correction, a rule or a failed approach: what was said as one.

A "No, ..." that answers a question corrects nothing; how much or how often a chat participant does
something binds nobody; "take breaks" breaks nothing; an instruction, a conditional or a guess
("If it doesn't work, try ...", "this will usually not work") reports no failed attempt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from tests.summarizers.sections import session_sections

pytestmark = pytest.mark.timeout(30)


def _events(*turns: tuple[str, str]) -> tuple[SessionEvent, ...]:
    return tuple(
        SessionEvent(type=kind, role="user" if kind == "user_input" else "assistant", content=text, seq=i + 1)
        for i, (kind, text) in enumerate(turns)
    )


def _chat(*turns: str) -> tuple[SessionEvent, ...]:
    """Alternating turns, the first speaker's as user inputs."""
    return _events(*(("user_input" if i % 2 == 0 else "assistant_output", t) for i, t in enumerate(turns)))


def _sections(events: tuple[SessionEvent, ...]) -> dict[str, list[str]]:
    """The session summary's lines by heading (a budget that cuts nothing)."""
    return session_sections(events, 4000)


def test_a_no_that_answers_a_question_is_no_correction() -> None:
    summary = _sections(
        _chat(
            "Tim: Nope, never been on a sports team.",
            "John: Have you been fishing?",
            "Tim: Actually I've never been fishing.",
            "John: Did you read the new book?",
            "Tim: No, I haven't read it yet.",
            "John: The meeting is on Friday.",
            "Tim: Actually, the town hall meeting is on Thursday, not Friday.",
        )
    )
    assert summary["USER PREFERENCES"] == ["Tim: Actually, the town hall meeting is on Thursday, not Friday."]


def test_an_agent_users_answer_is_no_rule_but_their_correction_is() -> None:
    summary = _sections(
        _events(
            ("user_input", "Move the session cache to Memcached."),
            ("assistant_output", "Have you used Redis here before?"),
            ("user_input", "No, I've never used Redis on this project."),
            ("assistant_output", "Should I keep the default port?"),
            ("user_input", "No, use port 11311."),
        )
    )
    assert summary["USER PREFERENCES"] == ["No, use port 11311."]


def test_how_much_a_participant_does_sets_no_rule() -> None:
    summary = _sections(
        _chat(
            "Audrey: I make sure to do at least one self-care activity each day - like a long walk.",
            "Andrew: I have at least two friends who always help me out.",
            "Audrey: The adoption forms must be filed by Friday.",
        )
    )
    assert summary["USER PREFERENCES"] == ["Audrey: The adoption forms must be filed by Friday."]


def test_taking_breaks_is_no_failed_approach() -> None:
    summary = _sections(
        _chat(
            "James: I'm trying to take breaks from my hobbies and do other things.",
            "John: Sounds healthy.",
            "James: I tried debugging the game for hours but couldn't solve it.",
        )
    )
    assert summary["FAILED APPROACHES"] == ["James: I tried debugging the game for hours but couldn't solve it."]


def test_instructions_and_conditionals_are_no_failed_approaches() -> None:
    summary = _sections(
        _events(
            (
                "user_input",
                "Fix the failing export test in tests/test_export.py. "
                "If you run a command and it doesn't work, try running a different command. "
                "A command that did not work once will not work the second time unless you modify it! "
                "Look for the fixture with find_file. If that doesn't work, use grep. "
                "Do not install packages with pip. This will usually not work.",
            ),
            ("assistant_output", "I tried pinning pyarrow to 14.0.1 but the test still fails."),
            ("user_input", "Oh no, the nightly export crashed again."),
        )
    )
    assert summary["FAILED APPROACHES"] == ["I tried pinning pyarrow to 14.0.1 but the test still fails."]
    assert summary["USER PREFERENCES"] == ["Do not install packages with pip."]


def test_never_or_always_before_a_verb_ending_in_ed_is_a_rule() -> None:
    # r61-R finding 1: "exceed", "embed", "seed" ... end in "ed" but are no past participles.
    summary = _sections(
        _chat(
            "Add retries to the HTTP client in client.py.",
            "I'll add retries with backoff.",
            "Never exceed 100 requests per minute. Never embed credentials in the repo.",
            "OK.",
            "Always seed the random generator. Never feed user input to eval. Always proceed with the dry run first.",
            "OK.",
            "I've never used Redis on this project.",
        )
    )
    assert summary["USER PREFERENCES"] == [
        "Never exceed 100 requests per minute.",
        "Never embed credentials in the repo.",
        "Always seed the random generator.",
        "Never feed user input to eval.",
        "Always proceed with the dry run first.",
    ]


def test_a_no_that_goes_on_to_redirect_is_a_correction() -> None:
    # r61-R finding 2: a denial followed by what to do instead corrects the agent.
    corrections = [
        "No, I didn't mean port 8080, use 11311.",
        "No, I didn't ask for a rewrite, just fix the bug.",
        "Actually, I didn't want the logs deleted, restore them.",
        "No, I'm not on macOS, I'm on Linux.",
        "No, but use the staging DB instead.",
    ]
    turns = ["Set up the test server for client.py."]
    for correction in corrections:
        turns += ["I'll start the test server on port 8080.", correction]
    summary = _sections(_chat(*turns))
    assert summary["USER PREFERENCES"] == corrections
    # The correction supersedes the agent's open plan ("Open: Plan: I'll start ... 8080" otherwise).
    assert summary["OUTCOME"] == [
        "Goal: Set up the test server for client.py.",
        "Open: User: No, but use the staging DB instead.",
    ]


def test_a_hedge_after_a_stated_failure_keeps_the_failure() -> None:
    # r61-R finding 3: a later clause's "might" / "whether" / "if" hedges that clause only; "broke my
    # build" and "breaks my build" report a failure.
    failures = [
        "Upgrading pip didn't work; it might be a proxy issue.",
        "Setting the flag didn't work, I'm not sure whether the config is loaded.",
        "The job fails if the disk is full, we reverted the change.",
        "I tried the patch and it broke my build.",
        "Tried it, breaks my build.",
    ]
    turns = ["Fix the failing export job in export.py."]
    for failure in failures:
        turns += ["Let me look.", failure]
    turns += [
        "Let me look.",
        "A command that did not work once will not work again unless you modify it. "
        "If you run a command and it doesn't work, try another one.",
    ]
    summary = _sections(_chat(*turns))
    assert summary["FAILED APPROACHES"] == failures


def test_a_past_never_or_always_is_no_rule_an_imperative_one_is() -> None:
    # r61-R3 finding 1: only 35 listed participles were past tense, so any other ("never installed",
    # "always assumed") made an everyday sentence a rule.
    said = [
        "I never installed xdist on this box.",
        "I always assumed the tests ran in parallel in CI.",
        "We never deployed on Fridays at my old job.",
        "I never noticed that flag before.",
        "I've always considered the staging box flaky.",
        "He never returned my call about the license.",
        "I never committed that file.",
        "I never expected the migration to take this long.",
        "I always ignored those deprecation warnings.",
        "You always answered my questions patiently.",
        "The old deploy script never checked the exit code.",
        "I never realized the cache was per user.",
        "My team always reviewed each other's migrations.",
    ]
    rules = [
        "Never exceed 100 requests per minute.",
        "Always seed the random generator.",
        "Please never proceed without a backup.",
        "The worker should never need root.",
        "Remember to always run the linter before pushing.",
    ]
    turns = ["Speed up the test suite in tests/."]
    for sentence in said + rules:
        turns += ["OK.", sentence]
    assert _sections(_chat(*turns))["USER PREFERENCES"] == rules


def test_an_answer_that_goes_on_in_its_own_words_is_no_correction() -> None:
    # r61-R3 finding 4: "it's", a bare "just" and "go ahead" after a "No, I haven't ..." made the answer a
    # correction, which closed the agent's open thread.
    answers = [
        "No, I haven't run the migrations yet, it's a fresh database.",
        "No, I haven't seen that error before, it's new.",
        "No, I didn't try that, it's too risky.",
        "Nope, I haven't, just been busy with work.",
        "No, I didn't change anything, it just started failing.",
        "Actually I didn't know that, it's interesting.",
        "No, I haven't heard back, it is frustrating.",
        "No, I wasn't there, I was just visiting my parents.",
        "No, we didn't get the results yet, just waiting.",
        "No, I haven't pushed it yet, it's still on my laptop.",
        "Nope, I haven't checked, just got back from lunch.",
        "No, I'm not in a hurry, go ahead and take your time.",
        "No, I wasn't aware of that, do whatever works.",
    ]
    for answer in answers:
        summary = _sections(_chat("Upgrade the API server to Python 3.12.", "I'll restart the API server now.", answer))
        assert summary["USER PREFERENCES"] == ["(none)"], answer
        assert summary["OUTCOME"] == [
            "Goal: Upgrade the API server to Python 3.12.",
            "Open: Plan: I'll restart the API server now.",
        ], answer
    for correction in ["No, I didn't mean port 8080, use 11311.", "No, I'm not on macOS, I'm on Linux."]:
        summary = _sections(_chat("Upgrade the API server to Python 3.12.", "I'll restart the API server now.", correction))
        assert summary["USER PREFERENCES"] == [correction]


def test_a_failure_word_that_describes_a_thing_before_a_hedge_reports_no_failure() -> None:
    # r61-R3 finding 7: a relative clause's or an adjective's failure word counted once a hedge followed it;
    # "breaks" as a noun ("during my breaks") was a failure after any attempt.
    said = [
        "Code that doesn't work in CI usually has a hidden dependency.",
        "Something that doesn't work on Windows often works fine in WSL.",
        "The reverted commit, if I remember right, was from Tuesday.",
        "Projects that got abandoned often come back.",
        "Tests that failed because of the network usually pass on retry.",
        "The abandoned branch, if I recall, had the old parser.",
        "The rolled back release might still be on the CDN.",
        "Features which got reverted often come back in the next release.",
        "Approaches that did not work before might work with the new driver.",
        "Caches that were rolled back usually rebuild overnight.",
        "I've been trying to take more walks during my breaks.",
        "I'm trying to stretch on my work breaks.",
        "I'm trying to plan our spring breaks better.",
        "I tried to relax between breaks.",
        "I've been trying to schedule regular breaks for the team.",
        "Trying the pomodoro technique with five minute breaks.",
        "I tried a new routine with more breaks.",
        "I'm trying to take my breaks on the balcony.",
        "We tried the new cafe during coffee breaks.",
    ]
    failures = [
        "We rolled back the release, which sometimes happens.",
        "The reverted commit was from Tuesday.",
        "Reverted it because it often crashed.",
        "I tried updating the lockfile and it broke my build.",
        "Tried the new config; it breaks on Windows.",
        "I tried bumping numpy and now it breaks.",
    ]
    turns = ["Fix the failing export job in export.py."]
    for sentence in said + failures:
        turns += ["Let me look.", sentence]
    assert _sections(_chat(*turns))["FAILED APPROACHES"] == failures


def test_never_or_always_before_a_bare_verb_ending_in_ed_is_a_rule_after_any_subject() -> None:
    # r61-R4 finding 1: "need", "exceed", "embed" ... after "you", "I", "can" or "Remember:" were taken
    # for a past tense, so these rules were lost; a real past tense still sets none.
    said = [
        "She never called me back after the interview.",
        "He always parked on the left side.",
        "Staging never received the migration.",
        "We never shipped that feature.",
        "I never needed root on the old server.",
        "I never exceeded the quota last month.",
        "We always embedded the version by hand back then.",
        "The old runner never succeeded on the first try.",
        "I always checked the logs by hand.",
        "The CI never cached the wheels.",
        "My laptop always overheated during builds.",
        "We always seeded the database from a dump.",
    ]
    rules = [
        "You always need to run the linter before committing.",
        "I always need the output as JSON, not YAML.",
        "Requests can never exceed 100 per minute on this API.",
        "You never need to touch the vendored files.",
        "Remember: always embed the version in the artifact name.",
    ]
    turns = ["Speed up the test suite in tests/."]
    for sentence in said + rules:
        turns += ["OK.", sentence]
    assert _sections(_chat(*turns))["USER PREFERENCES"] == rules


def test_a_failure_whose_subject_is_this_or_a_cleft_is_a_failure_before_a_hedge() -> None:
    # r61-R4 finding 3: "this" / "the one thing that" before "doesn't work" is the subject, not a
    # description; an adjective after a determiner or a plain relative clause still describes a thing.
    said = [
        "Code that doesn't work in CI usually has a hidden dependency.",
        "The reverted commit often had a typo.",
        "Its reverted state might confuse git.",
        "This abandoned branch might still have the old parser.",
        "Our rolled back release might still be on the CDN.",
        "Projects that got abandoned usually lack tests.",
        "Scripts which don't work on Windows often work in WSL.",
        "The abandoned approach, if I recall, used threads.",
        "A plugin that doesn't work usually logs nothing.",
        "Tools that didn't work before might work with the new driver.",
    ]
    failures = [
        "This doesn't work; it might be the cache.",
        "This won't work, it might need root.",
        "The one thing that still doesn't work is the export, it might be permissions.",
    ]
    turns = ["Fix the failing export job in export.py."]
    for sentence in said + failures:
        turns += ["Let me look.", sentence]
    assert _sections(_chat(*turns))["FAILED APPROACHES"] == failures


@pytest.mark.anyio
async def test_actually_then_a_redirect_before_the_first_action_is_a_correction(tmp_path: Path) -> None:
    # r61-R4 lesser note: "Actually" needed a comma, so these became part of the task instead of a
    # correction the learner weighs; a task title that opens with "Actually" stays the task.
    corrections = ["Actually the port is 11311.", "Hmm, actually use poetry instead."]
    statements = [
        "Actually the docs build fails on Sphinx 7 with a KeyError.",
        "Actually running the tests shows a KeyError in parser.py.",
        "Actually deleted rows come back after a restore.",
        "Actually the parser drops trailing spaces in DA values.",
        "Actually the cache never expires entries in cache.py.",
        "Actually existing users lose their settings on upgrade.",
        "Actually can you also add a test?",
        "Actually the export to CSV fails for empty tables.",
        "Actually installing with pip breaks the entry points.",
        "Actually the timezone offset in parse_date is off by one.",
        "Actually useful error messages are missing from the validator.",
    ]
    learned: dict[str, bool] = {}
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        for n, said in enumerate(corrections + statements):
            await memory.begin_run("Deploy the api service to staging.", environment="ops")
            await memory.append(SessionEvent(type="user_input", content=said))
            args = json.dumps({"cmd": "make deploy ENV=production"})
            await memory.append(SessionEvent(type="tool_call", tool_name="bash", tool_call_id=f"c{n}", tool_args=args))
            await memory.append(SessionEvent(type="tool_result", tool_call_id=f"c{n}", content="deployed"))
            await memory.commit_run("Deployed.", outcome="success")
            learned[said] = bool((await memory.learn_experience()).records)
    # A correction before the first action makes no procedure of its own; a restated task does.
    assert learned == {said: said in statements for said in corrections + statements}
