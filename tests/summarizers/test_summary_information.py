"""The summary layer keeps information, not position (#38).

The rule every test here checks a summary's list entries against (a ``- ``
bullet of a chunk summary or of the rolling summary), after dropping a
leading ``Name:`` / ``Label:`` prefix: an entry is **junk** when it is

- a bare file path (``reproduce_bug.py``, ``src/app/models.py:12``);
- a test runner's line (``PASSED``, ``3 passed in 0.2s``,
  ``tests/a.py::test_b PASSED``, ``collected 4 items``, ``..F. [50%]``, ``Ran 3 tests in``);
- ends in a path cut mid-word (``tests/billing/te``);
- or has at most one content word (letters, 3+ long, not a stopword): "Hey Mel!", "Thanks, Tom!".

A command (``$ rm reproduce.py``, ``submit()``) is what was run, however short: never junk.

A chunk summary is **contentless** when each of its lines is blank, a heading,
a ``Files:`` line, a bare path or a ``$ command``: it says nothing of what happened.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.config import Config
from aiden.events import EventType, SessionEvent
from aiden.policy.summary_md import prune_superseded
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.mustkeep.check import extract_must_keep
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import FakeLLMServer, ScriptedSummarizer
from tests.summarizers.conftest import DemoRun

pytestmark = [pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]

_STOP = frozenset(
    {
        "the", "and", "for", "with", "from", "into", "onto", "that", "this", "these", "those", "you",
        "your", "our", "their", "his", "her", "its", "was", "were", "are", "been", "have", "has", "had",
        "not", "but", "she", "they", "them", "him", "who", "what", "when", "where", "which", "will",
        "would", "can", "could", "just", "very", "also", "than", "then", "there", "here", "too", "all",
        "any", "some"
    }
)  # fmt: skip
_PATH = re.compile(
    r"^[`'\"]?(?:[\w.-]+/)+[\w.-]*[`'\"]?(?::\d+)?$|^[`'\"]?[\w-]+\.[A-Za-z]{1,5}[`'\"]?(?::\d+)?$"
)
_RUNNER = re.compile(
    r"^[=\-\s]*(?:\d+ (?:passed|failed|errors?|skipped)\b|(?:PASSED|FAILED|ERROR|OK)\b\W*$|collected \d+ items?"
    r"|[\w/.-]+::[\w\[\]:.-]+(?:\s+(?:PASSED|FAILED|ERROR|SKIPPED))?\s*(?:\[\s*\d+%\])?$|[.FEsx]+\s*\[\s*\d+%\]"
    r"|Ran \d+ tests? in)"
)
_CUT_PATH = re.compile(r"(?:^|\s)(?:[\w.-]+/)+[\w-]{1,3}…?$")
_PREFIX = re.compile(r"^[A-Z][\w ()'-]{0,30}:\s+")
_COMMAND = re.compile(r"^\$ \S|^[\w.-]+\(.*\)$")


def junk_kind(entry: str) -> str | None:
    """Why a list entry is junk (the module docstring's rule), else None."""
    body = entry.strip().strip("`")
    if _COMMAND.match(body):
        return None  # a command is what was run ("$ rm reproduce.py", "submit()"), however short
    if not _PATH.match(body):
        body = _PREFIX.sub("", body)
        body = _PREFIX.sub("", body).strip().strip("`")  # "User: Name: ..."
    if not body:
        return "empty"
    if _PATH.match(body):
        return "bare path"
    if _RUNNER.match(body):
        return "test-runner line"
    if _CUT_PATH.search(body) and not re.search(r"\.\w{1,5}…?$", body):
        return "cut path"
    words = [w for w in re.findall(r"[a-z]{3,}", body.casefold()) if w not in _STOP]
    if len(words) <= 1:
        return "one content word or none"
    return None


def list_entries(summary: str) -> Iterator[str]:
    for line in summary.splitlines():
        stripped = line.strip()
        if stripped.startswith("- ") and not stripped.startswith("- **chunk_"):
            yield stripped[2:]


_HEADING = re.compile(r"^[A-Z][\w ()-]{0,40}:$")


def contentless(summary: str) -> bool:
    """The module docstring's rule: nothing but headings, Files lines, paths and commands (or nothing)."""
    for line in summary.splitlines():
        s = line.strip().removeprefix("- ").strip()
        if not s or s == "---" or _HEADING.match(s) or s.startswith(("Files:", "$ ")) or _PATH.match(s):
            continue
        return False
    return True


def junk(summaries: list[str]) -> list[tuple[str, str]]:
    return [(kind, e) for text in summaries for e in list_entries(text) if (kind := junk_kind(e))]


# --- a synthetic chat: facts sit behind greetings, thanks and anticipation ----------------------------


def _chat() -> tuple[SessionEvent, ...]:
    turns = [
        ("Priya", "Hey Tom! Good to see you! How have you been?"),
        ("Tom", "Hi Priya! Thanks for asking. I adopted a beagle named Biscuit last Sunday."),
        (
            "Priya",
            "Wow, that's so sweet! Can't wait to meet him! I signed up for a pottery class on Thursdays.",
        ),
        ("Tom", "Sounds great! Thanks! My sister Mara moved to Lisbon in March for a design job."),
        ("Priya", "Awesome! So glad for her. I love fantasy and sci-fi movies, Dune is my favorite."),
        ("Tom", "Totally agree, it's the best! Can't wait! We booked a cabin at Lake Tahoe for 12 June."),
        ("Priya", "Thanks, Tom! Your words mean a lot to me. I ran my first half marathon in 1:58."),
        ("Tom", "Amazing, so proud of you! Talk soon! I'm learning the cello with a teacher from Vienna."),
    ] * 2  # repeated: greetings recur, facts dedupe
    return _said_by(turns)


def _said_by(turns: list[tuple[str, str]]) -> tuple[SessionEvent, ...]:
    """Priya's turns are the user's, Tom's the assistant's, each written as ``Name: text``."""
    return tuple(
        SessionEvent(
            type="user_input" if who == "Priya" else "assistant_output",
            role="user" if who == "Priya" else "assistant",
            content=f"{who}: {text}",
            seq=n + 1,
        )
        for n, (who, text) in enumerate(turns)
    )


def test_phatic_lines_lose_to_informative_ones_under_a_tight_budget() -> None:
    summary = ExtractiveSummarizer().summarize_sync(
        SummaryRequest(purpose="history", events=_chat(), max_tokens=220)
    )
    text = summary.text
    assert junk([text]) == []
    for phatic in (
        "Hey Tom",
        "Thanks, Tom",
        "Can't wait",
        "Sounds great",
        "Your words mean a lot",
        "Talk soon",
    ):
        assert phatic not in text, phatic
    # What a later question needs, with who said it: no first sentence of a turn among these.
    for fact in (
        "Tom: I adopted a beagle named Biscuit last Sunday.",
        "Priya: I signed up for a pottery class on Thursdays.",
        "Tom: My sister Mara moved to Lisbon in March for a design job.",
        "Priya: I love fantasy and sci-fi movies, Dune is my favorite.",
        "Tom: We booked a cabin at Lake Tahoe for 12 June.",
        "Priya: I ran my first half marathon in 1:58.",
    ):
        assert fact in text, (fact, text)
    assert "Constraints:" not in text  # "Can't wait!" is anticipation, no constraint


def test_a_chat_participants_musings_are_no_rules_that_crowd_out_the_facts() -> None:
    # Sayings with "always", "without", "don't" or "I want" read as the user's constraints and
    # preferences when the user instructs an agent; said by a named participant of a chat they
    # are talk, ranked by what they tell (#38). Old code: the five musings fill the budget first.
    musings = [
        "Taking care of ourselves is always so important, even if it is not easy.",
        "I couldn't have gotten through those months without all of them around me.",
        "Those tough times really don't last forever, hope and love exist everywhere.",
        "I want to help people who have gone through the same things as me.",
        "I'd like to keep going and never give up on what matters to me.",
    ]
    facts = [
        ("Priya", "My grandma gave me this necklace back home in Sweden."),
        ("Tom", "I loved reading Charlotte's Web as a kid in Denver."),
        ("Priya", "Last Friday I went to a council meeting for adoption in Oakland."),
    ]
    turns = [("Priya", m) for m in musings] + facts
    events = _said_by(turns)
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events, max_tokens=110)).text
    for who, fact in facts:
        assert f"{who}: {fact}" in text, (fact, text)
    assert "Constraints:" not in text and "Preferences:" not in text, text
    # Nor does the must-keep check append them back.
    assert extract_must_keep(events, max_items=20) == []
    # A participant's binding rule is one; the user's own rule, unnamed, still files under Constraints first.
    deadline = SessionEvent(type="user_input", role="user", content="Priya: The venue must be booked by Friday.")
    assert extract_must_keep((*events, deadline), max_items=20) == ["Priya: The venue must be booked by Friday."]
    rule = SessionEvent(type="user_input", role="user", content="Never deploy on Fridays.", seq=len(turns) + 1)
    ruled = ExtractiveSummarizer().summarize_sync(
        SummaryRequest(purpose="history", events=(*events, rule), max_tokens=110)
    ).text
    assert "Constraints:\n- Never deploy on Fridays." in ruled, ruled


def test_a_must_that_guesses_binds_nobody() -> None:
    # In chat, "must" mostly guesses how something felt; filed as the user's constraints (kept
    # first, appended back by the must-keep check) such lines crowd out the facts (#38: 143 of
    # LoCoMo's 153 "binding" sentences). Old code: every one of these was a constraint.
    guesses = [
        "It must be so rewarding to see everyone enjoy your cooking!",
        "That must've taken you ages to build.",
        "You must be thrilled with the bigger backyard!",
        "Seeing your old friend must have brought back so many memories.",
        "Barcelona is a must-visit city!",
        "Taking care of ourselves is a must.",
        "You must love it there.",
        "It must be tough living in the city.",
        "But at least I had one more country on my list!",
    ]
    events = _said_by([("Priya", g) for g in guesses] + [("Tom", "My sister Mara opened a bakery in Lisbon.")])
    assert extract_must_keep(events, max_items=20) == []
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events, max_tokens=400)).text
    assert "Constraints:" not in text, text
    # A must that asks for something binds, named or not, as does a limit.
    rules = [
        "Priya: The venue must be booked by Friday.",
        "Priya: The output must be valid JSON.",
        "You must run the linter before every commit.",
        "Keep answers to at most 3 sentences.",
        "Tests must pass before a merge.",
    ]
    ruled = tuple(SessionEvent(type="user_input", role="user", content=r, seq=n + 1) for n, r in enumerate(rules))
    assert extract_must_keep(ruled, max_items=20) == rules


def test_what_the_other_side_tells_is_kept_without_a_speakers_name() -> None:
    # A chat of roles only (no "Name: ..."): the other side telling of itself, "I love fantasy and
    # sci-fi movies", answers "what movies does it like?" as a named speaker's would. Old code: only a named
    # speaker's sentences counted, so half of a role-only chat went unsummarized (#38).
    said: list[tuple[EventType, str]] = [
        ("user_input", "What kind of movies do you like?"),
        ("assistant_output", "I love fantasy and sci-fi movies, they take me somewhere else. Let me check the listings."),
        ("user_input", "My sister opened a bakery in the old town."),
        ("assistant_output", "My brother started painting lake sunrises last year."),
        # An assistant's advice tells nothing of anyone: it would crowd out what the user told.
        ("assistant_output", "The Louvre is quietest on weekday mornings when the queues at the pyramid are short."),
    ]
    events = tuple(
        SessionEvent(type=kind, content=text, seq=n + 1) for n, (kind, text) in enumerate(said)
    )
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events, max_tokens=300)).text
    assert text.endswith(
        "Notes:\n- I love fantasy and sci-fi movies, they take me somewhere else.\n"
        "- My brother started painting lake sunrises last year."
    ), text
    assert "Let me check" not in text  # an intent is no finding
    assert "Louvre" not in text


def test_what_a_speaker_tells_of_themselves_outranks_the_same_words_said_back_to_them() -> None:
    # A later question asks what Ana told ("Where did Ana's sister open a bakery?"); Tom's echo
    # of it tells nothing more. Old code: equal words, equal rank, the echo (first seen) kept.
    pairs = [
        ("your sister Mara opened a bakery in Lisbon.", "My sister Mara opened a bakery in Lisbon."),
        ("your brother Sam ran the Boston marathon.", "My brother Sam ran the Boston marathon."),
        ("your dog Biscuit won a ribbon at Denver.", "My dog Biscuit won a ribbon at Denver."),
    ]
    said = [t for echo, told in pairs for t in (f"Tom: So {echo}", f"Ana: Yes! {told}")]
    events = tuple(
        SessionEvent(type="assistant_output", role="assistant", content=text, seq=n + 1) for n, text in enumerate(said)
    )
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events, max_tokens=50)).text
    assert text == "Notes:\n" + "\n".join(f"- Ana: {told}" for _, told in pairs)


def test_a_kept_line_says_on_which_date_it_was_said() -> None:
    # "Last weekend" answers "when did Ana go camping?" only with the date it was said on; the
    # summary dates each run of lines said under one stated date (#38). Old code: no date on them.
    said: list[tuple[EventType, str]] = [
        ("system_event", "Session 1 began at 1:56 pm on 8 May, 2023."),
        ("assistant_output", "Ana: I went camping at Lake Tahoe with my kids last weekend."),
        ("assistant_output", "Ana: My sister Mara opened a bakery in Lisbon."),
        ("system_event", "Session 2 began at 7:55 pm on 9 June, 2023."),
        ("assistant_output", "Ana: Last Friday I ran the Boston marathon in 3:58."),
        # A summary carried in a synthetic event is no clock: what follows keeps 9 June.
        ("system_event", "Summary of the turn so far: planned on 1 January, 2020."),
        ("assistant_output", "Ana: My dog Biscuit won a ribbon at Denver yesterday."),
    ]
    events = tuple(
        SessionEvent(type=kind, content=text, seq=n + 1, synthetic=text.startswith("Summary"))
        for n, (kind, text) in enumerate(said)
    )
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events, max_tokens=400)).text
    assert text.splitlines() == [
        "Facts:",
        "- Session 1 began at 1:56 pm on 8 May, 2023.",
        "- Session 2 began at 7:55 pm on 9 June, 2023.",
        # Said right after the line that states its date: not dated again.
        "- Ana: Last Friday I ran the Boston marathon in 3:58.",
        "- Summary of the turn so far: planned on 1 January, 2020.",
        "Notes:",
        "- (8 May, 2023) Ana: I went camping at Lake Tahoe with my kids last weekend.",
        "- Ana: My sister Mara opened a bakery in Lisbon.",
        "- (9 June, 2023) Ana: My dog Biscuit won a ribbon at Denver yesterday.",
    ], text


def test_what_the_hot_window_still_says_needs_no_room_in_the_chunk_summary() -> None:
    said = ["Ana: My sister Mara opened a bakery in Lisbon.", "Ana: My brother Sam ran the Boston marathon."]
    events = tuple(
        SessionEvent(type="assistant_output", role="assistant", content=text, seq=n + 1) for n, text in enumerate(said)
    )
    hot = (SessionEvent(type="user_input", role="user", content="Tom: How is the bakery Mara opened in Lisbon?", seq=3),)

    def summary(**hot_window: tuple[SessionEvent, ...]) -> str:
        request = SummaryRequest(purpose="history", events=events, max_tokens=20, **hot_window)
        return ExtractiveSummarizer().summarize_sync(request).text

    assert summary() == "Notes:\n- Ana: My sister Mara opened a bakery in Lisbon."
    # The prompt shows the bakery in Lisbon verbatim after this compaction: the room goes to the marathon.
    assert summary(hot_window=hot) == "Notes:\n- Ana: My brother Sam ran the Boston marathon."
    # The event loop's path (sliced, with checkpoints) keeps the same.
    request = SummaryRequest(purpose="history", events=events, max_tokens=20, hot_window=hot)
    assert anyio.run(ExtractiveSummarizer().summarize, request).text == summary(hot_window=hot)


def test_a_compaction_hands_the_summarizer_the_hot_window_it_leaves(tmp_path: Path) -> None:
    async def run() -> tuple[list[SummaryRequest], list[SessionEvent]]:
        summarizer = ScriptedSummarizer()
        async with aiden.open_memory(tmp_path, summarizer=summarizer, context_window=4096) as memory:
            for i in range(40):
                await memory.append(SessionEvent(type="user_input", role="user", content=f"Step {i}: check job {i}. " * 8))
                await memory.append(
                    SessionEvent(type="assistant_output", role="assistant", content=f"Job {i} passes. " * 20)
                )
            outcome = await memory.maintain(manual=True)
            assert outcome.compacted, outcome
            return summarizer.requests, await memory.hot_window()

    requests, hot = anyio.run(run)
    (history,) = [r for r in requests if r.purpose == "history"]
    assert [e.seq for e in history.hot_window] == [e.seq for e in hot]
    assert history.hot_window and not {e.seq for e in history.events} & {e.seq for e in history.hot_window}


def test_the_rolling_fold_drops_phatic_lines_an_older_summary_held() -> None:
    old = (
        "Constraints:\n- Can't wait to see it!\n- Never deploy on Fridays.\n"
        "Requests:\n- Thanks, Tom!\n- Please book the cabin at Lake Tahoe for 12 June.\n"
    )
    folded = ExtractiveSummarizer().summarize_sync(
        SummaryRequest(purpose="rolling_fold", previous_summary=old, text="Notes:\n- Hey Mel!\n")
    )
    assert folded.text == (
        "Constraints:\n- Never deploy on Fridays.\nRequests:\n- Please book the cabin at Lake Tahoe for 12 June."
    )


def test_guesses_and_reassurance_are_no_constraint_a_summary_must_keep() -> None:
    said = (
        "Priya: That must have been awesome! No worries, Tom! Can't wait. The venue must be booked by Friday."
    )
    events = (SessionEvent(type="user_input", role="user", content=said, seq=1),)
    assert extract_must_keep(events, max_items=10) == ["The venue must be booked by Friday."]
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events)).text
    assert text == (
        "Goal: Priya: The venue must be booked by Friday.\nOpen thread:\n- User: Priya: The venue must be booked by Friday."
    )


def test_a_named_speakers_sentences_are_not_repeated_under_the_goal_that_holds_them() -> None:
    said = (
        "Caroline: A lot has happened since we last chatted. I joined a new LGBTQ activist group last Tuesday."
        " I'm giving my voice and making a real difference at the council meetings."
    )
    events = (SessionEvent(type="user_input", role="user", content=said, seq=1),)
    text = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="turn_prefix", events=events)).text
    assert text.startswith(f"Goal: {said}\n")
    # Each sentence once in the goal, once in the open thread (summary.md drops a superseded one).
    for sentence in ("I joined a new LGBTQ activist group last Tuesday.", "making a real difference"):
        assert text.count(sentence) == 2, text


# --- coding agents: every chunk says what happened; no list entry is junk ------------------------------


def test_every_demo_chunk_summary_says_what_happened(demo_run: DemoRun) -> None:
    # One run_demo(root) with its defaults, shared with test_summary_quality (conftest.demo_run).
    chunks, summary_md = list(demo_run.chunk_summaries), demo_run.summary_md
    rolling, _, recent = summary_md.partition("## Recent Chunks")
    shown = [part.partition("\n")[2] for part in re.split(r"^- \*\*chunk_", recent, flags=re.M)[1:]]
    assert len(chunks) >= 10 and len(shown) >= 8
    # As stored and as summary.md shows them (newer chunks' steps and commands pruned).
    assert [s for s in chunks if contentless(s)] == []
    assert [s for s in shown if contentless(s)] == []
    assert junk([*chunks, rolling]) == []


def _swe_sessions() -> list[tuple[str, tuple[SessionEvent, ...]]]:
    base = os.environ.get("AIDEN_REAL_DATA")
    if not base or not (Path(base) / "swe-agent").is_dir():
        pytest.skip("AIDEN_REAL_DATA/swe-agent is absent (set AIDEN_REAL_DATA to the real-data directory)")
    sys.path.insert(0, str(ROOT / "tests" / "governance"))
    from swe_sessions import load_sessions

    return [(s.name, s.events) for s in load_sessions(Path(base))]


@pytest.mark.timeout(120)
def test_swe_agent_sessions_replayed_with_compactions_hold_no_junk() -> None:
    """The 5 recorded SWE-agent sessions, compacted every 4 events (chunk summary, then rolling fold)."""
    summarizer = ExtractiveSummarizer()
    problems: list[tuple[str, str, str]] = []
    chunks_seen = 0
    for name, events in _swe_sessions():
        rolling = ""
        chunks: list[str] = []
        for start in range(0, len(events), 4):
            chunk = summarizer.summarize_sync(
                SummaryRequest(purpose="history", events=events[start : start + 4], max_tokens=400)
            ).text
            chunks.append(chunk)
            rolling = summarizer.summarize_sync(
                SummaryRequest(purpose="rolling_fold", previous_summary=rolling, text=chunk, max_tokens=1200)
            ).text
        shown = prune_superseded([rolling, *chunks])
        chunks_seen += len(chunks)
        problems += [(name, "contentless", c) for c in [*chunks, *shown[1:]] if contentless(c)]
        problems += [(name, kind, e) for kind, e in junk([*chunks, rolling])]
    assert chunks_seen > 30
    assert problems == []


# --- the LLM summarizer's prompt: the same rule (checked against the local fake server only) ----------


@pytest.mark.anyio
@pytest.mark.parametrize("one_call", [True, False])
async def test_the_llm_prompt_asks_for_what_a_later_question_needs(one_call: bool) -> None:
    answer = {"user_goal": "", "facts": ["Tom adopted a beagle named Biscuit last Sunday."], "text": ""}
    with FakeLLMServer(script=[json.dumps(answer)]) as server:
        summarizer = LiteLLMSummarizer(
            "openai/test-model",
            config=Config(),
            api_base=server.base_url,
            api_key="sk-test",
            one_call_per_compaction=one_call,
        )
        result = await summarizer.summarize(SummaryRequest(purpose="history", events=_chat()))
        (sent,) = server.requests
    system, user = (m["content"] for m in sent.body["messages"])
    assert "Keep what a later question could need, with who said it and when" in system
    assert "not by their place in a message" in system
    assert "Prefer what someone told of themselves over reactions, compliments and questions back" in system
    assert "a participant's musing" in system and "is no constraint or preference of the user" in system
    assert 'or guess ("that must be so rewarding")' in system
    assert "give a relative time (\"last Friday\", \"two weeks ago\") with the date it was said on" in system
    assert 'never a greeting, thanks, compliment or "can\'t wait"' in system
    assert "never a bare file path" in system and "never a test runner's line" in system
    assert "never only which files were touched" in system
    assert "what a later question could need, each a full sentence with who said it" in user
    assert "what happened in this part, in a sentence or two (never only a file list)" in user
    assert "[2] ASSISTANT: Tom: Hi Priya! Thanks for asking." in user
    assert result.structured.facts[0] == "Tom adopted a beagle named Biscuit last Sunday."


_SEEDED_RUN = """
import random, sys
from aiden.events import SessionEvent
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.extractive.salience import Rarity
from aiden.summarizers.protocol import SummaryRequest

rng = random.Random(7)
vocab = [a + b for a in ("gar", "lan", "mor", "tel", "vis", "quo") for b in ("den", "tor", "ish", "ova", "ump", "ix")]
texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(6, 14))) + "." for _ in range(200)]
rarity = Rarity(texts)
print([repr(rarity.information(t)) for t in texts])
events = tuple(
    SessionEvent(type="user_input", role="user", content="Priya: I " + t, seq=n + 1) for n, t in enumerate(texts)
)
print(ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events, max_tokens=300)).text)
"""


def test_a_summary_is_the_same_under_every_hash_seed() -> None:
    # Python's string hashes (and so a set's order) change with PYTHONHASHSEED, from process to process.
    outputs = {
        seed: subprocess.run(
            [sys.executable, "-c", _SEEDED_RUN],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            check=True,
        ).stdout
        for seed in (0, 1, 2)
    }
    assert outputs[0].count("\n- ") >= 5  # the summary kept lines to compare
    assert outputs[1] == outputs[0]
    assert outputs[2] == outputs[0]
