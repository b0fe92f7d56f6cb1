"""[Window] The summary layer is cut by priority, not by position (#19): resume facts and the newest chunk stay."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiden
from aiden import Config, SessionEvent
from aiden.context.summary_fit import OMITTED_NOTE_PREFIX, SummaryItem, fit_summary_layer, summary_items
from aiden.policy.summary_md import summary_parts
from aiden.policy.tokens import estimate_tokens
from aiden.storage.chunks import ChunkEntry, ChunkIndex, render_summary_md
from aiden.testing import ScriptedSummarizer

Recent = list[tuple[str, str, bool]]


def entry(first: int, last: int, summary: str) -> ChunkEntry:
    return ChunkEntry(
        chunk_id=f"chunk_{first:010d}_{last:010d}",
        first_seq=first,
        last_seq=last,
        count=last - first + 1,
        sha256="0",
        summary=summary,
    )


def summary_md(rolling: str, chunks: list[ChunkEntry]) -> str:
    return render_summary_md(ChunkIndex(rolling_summary=rolling, chunks=chunks), chunks).strip()


def recent(*chunks: ChunkEntry) -> Recent:
    """The Recent Chunks parts of ``chunks``, as the prompt builder takes them from the index."""
    return [(c.chunk_id, c.summary, c.degraded) for c in chunks]


def shown_line(rolling: str, chunks: Recent, item: SummaryItem, n: int = 0) -> str:
    """The ``n``-th line of ``item`` as summary.md shows it (a chunk's lines indented under its entry)."""
    shown, parts = summary_parts(rolling, chunks)
    line = [shown, *(text for _, text, _ in parts)][item.part].splitlines()[item.lines[n]]
    return line if item.part == 0 or not line else f"  {line}"


ROLLING = """Goal: migrate the gateway
Decisions:
- use the flag gw_v2 because a switch cannot be rolled back
Open thread:
- step 3
Files: a.py, b.py
Commands:
- read_file(path=a.py)
- read_file(path=b.py)
Facts:
- staging listens on port 8234"""
OLDER = entry(
    10,
    19,
    'Open thread:\n- step 4\nCommands:\n- read_file(path=c.py)\nTool results:\n- read_file: """mod."""',
)
NEWEST = entry(
    20,
    29,
    "Errors:\n- ImportError: no AsyncPool → fixed: pin sqlalchemy==2.4.1\nCommands:\n- $ pytest -q"
    "\n\n---\n\nTurn Context (split turn):\nOpen thread:\n- step 5",
)
TEXT = summary_md(ROLLING, [OLDER, NEWEST])
RECENT = recent(OLDER, NEWEST)


def test_noise_goes_first_and_the_newest_chunk_stays() -> None:
    # (the old cut kept the head: the rolling Commands stayed, the newest chunk went)
    expected = """# Session History (compressed chunks)

## Rolling Summary

Goal: migrate the gateway
Decisions:
- use the flag gw_v2 because a switch cannot be rolled back
Open thread:
- step 3
Files: a.py, b.py
Facts:
- staging listens on port 8234

## Recent Chunks

- **chunk_0000000010_0000000019**
  Open thread:
  - step 4

- **chunk_0000000020_0000000029**
  Errors:
  - ImportError: no AsyncPool → fixed: pin sqlalchemy==2.4.1

  ---

  Turn Context (split turn):
  Open thread:
  - step 5
[Summary shortened for this prompt: left out Commands (4 lines), Tool results (1). summary.md keeps them all; \
recall_session_chunks finds them.]"""
    fit = fit_summary_layer(ROLLING, RECENT, len(expected), len)
    assert (fit.text, fit.trimmed, fit.omitted_lines) == (expected, True, 5)
    assert fit_summary_layer(ROLLING, RECENT, len(TEXT), len).text == TEXT


def test_a_tighter_budget_gives_up_whole_chunks_and_says_which() -> None:
    # The goal, then the newest chunk (what was going on right before the hot window) stay longest.
    expected = """# Session History (compressed chunks)

## Rolling Summary

Goal: migrate the gateway

## Recent Chunks

- **chunk_0000000020_0000000029**
  Errors:
  - ImportError: no AsyncPool → fixed: pin sqlalchemy==2.4.1
[Summary shortened for this prompt: left out Commands (4 lines), Tool results (1), Files (1), Facts (1), \
Open thread (3), Decisions (1); the chunks for seq 10-19 entirely. summary.md keeps them all; \
recall_session_chunks finds them.]"""
    assert fit_summary_layer(ROLLING, RECENT, 500, len).text == expected
    only_note = fit_summary_layer(ROLLING, RECENT, 300, len)
    assert only_note.text.startswith(
        OMITTED_NOTE_PREFIX + "Commands (4 lines), Tool results (1), Files (1), Facts (1)"
    )
    assert only_note.omitted_lines == 13
    assert fit_summary_layer(ROLLING, RECENT, 150, len) == fit_summary_layer(ROLLING, RECENT, 0, len)
    assert fit_summary_layer(ROLLING, RECENT, 0, len).text == ""


def test_no_summary_is_an_empty_layer() -> None:
    assert fit_summary_layer("", [], 0, len) == fit_summary_layer("", [], 100, len)
    assert fit_summary_layer("", [], 0, len).text == ""


def test_older_chunks_keep_their_facts_before_their_open_thread() -> None:
    older = entry(1, 9, "Open thread:\n- step 1\nDecisions:\n- keep the v1 schema because clients pin it")
    newer = entry(10, 19, "Open thread:\n- step 2")
    items = sorted(summary_items("", recent(older, newer)), key=lambda item: item.rank)
    ordered = [shown_line("", recent(older, newer), item).strip() for item in items]
    assert ordered == ["- step 2", "- keep the v1 schema because clients pin it", "- step 1"]


def test_a_bullet_and_its_continuation_lines_are_one_item() -> None:
    long = "because " + "the old pool leaks connections under load " * 4
    rolling = f"Decisions:\n- first line of a decision\n    {long}\n- {long}short one\nCommands:\n- ls"
    (decision, short, command) = summary_items(rolling, [])
    assert (decision.lines, short.lines, command.lines) == ((1, 2), (3,), (5,))
    expected = (
        "# Session History (compressed chunks)\n\n## Rolling Summary\n\nDecisions:\n"
        f"- first line of a decision\n    {long}\n"
        f"{OMITTED_NOTE_PREFIX}Commands (1 lines), Decisions (1). summary.md keeps them all; "
        "recall_session_chunks finds them.]"
    )
    assert fit_summary_layer(rolling, [], len(expected), len).text == expected


def test_lines_go_by_information_value_not_by_section_or_age() -> None:
    # The rolling summary is full of filler; an older chunk holds the one line naming a place and a date.
    rolling = "Constraints:\n" + "\n".join(f"- Can't wait to see you again, so much fun {n}!" for n in range(4))
    older = entry(1, 9, "Facts:\n- Jon moved to West County in March 2021 for the bakery job")
    newer = entry(10, 19, "Open thread:\n- talking about the weekend")
    chunks = recent(older, newer)
    text = summary_md(rolling, [older, newer])
    fact = "  - Jon moved to West County in March 2021 for the bakery job"
    filler = [line for line in text.splitlines() if "Can't wait" in line]
    # Room for the newest chunk, one line more and the note: the fact, not the filler (by section
    # and age the rolling summary's Constraints would have gone first and the chunk's fact dropped).
    items = sorted(summary_items(rolling, chunks, len), key=lambda item: item.rank)
    assert [shown_line(rolling, chunks, i) for i in items[:2]] == ["  - talking about the weekend", fact]
    budget = next(
        b for b in range(len(text)) if fact in fit_summary_layer(rolling, chunks, b, len).text.splitlines()
    )
    fit = fit_summary_layer(rolling, chunks, budget, len)
    assert fit.trimmed and not any(line in fit.text for line in filler)


def test_a_kept_line_keeps_its_indentation_when_the_lines_above_it_go() -> None:
    filler = "".join(f"\n- thanks so much {n}!" for n in range(8))
    older = entry(1, 9, "- ok\n  - Jon moved to West County in March 2021 for the bakery job" + filler)
    newer = entry(10, 19, "Open thread:\n- talking about the weekend")
    text = summary_md("", [older, newer])
    fact = "    - Jon moved to West County in March 2021 for the bakery job"
    assert fact in text.splitlines()
    fits = [fit_summary_layer("", recent(older, newer), b, len) for b in range(len(text))]
    first = next(fit for fit in fits if fact in fit.text.splitlines())
    assert first.trimmed and "  - ok" not in first.text.splitlines()


# --- properties over generated summary.md texts ----------------------------------------

_SECTIONS = [
    "Goal", "Decisions", "Constraints", "Preferences", "Errors", "Failed approaches", "Open thread",
    "Facts", "Must keep", "Notes", "Requests", "Files", "Tool results", "Commands",
]  # fmt: skip
_WORDS = st.lists(
    st.sampled_from(["gateway", "pin", "step", "read_file(path=a.py)", "=", "2.4.1", "→"]), max_size=8
)


@st.composite
def blocks(draw: st.DrawFn, tag: str) -> str:
    out: list[str] = []
    for n, section in enumerate(draw(st.lists(st.sampled_from(_SECTIONS), min_size=1, max_size=5))):
        words = " ".join(draw(_WORDS))
        if section in ("Goal", "Files"):
            out.append(f"{section}: {tag}-{n} {words}")
            continue
        out.append(f"{section}:")
        for m in range(draw(st.integers(1, 4))):
            out.append(f"- {tag}-{n}-{m} {words}")
            if draw(st.booleans()) and m == 0:
                out.append(f"    {tag}-{n}-{m} continued")
            if draw(st.booleans()):
                out.append(f"  - {tag}-{n}-{m} nested {words}")  # its own item, indented under the one above
    return "\n".join(out)


@st.composite
def summaries(draw: st.DrawFn) -> tuple[str, Recent]:
    rolling = draw(blocks("r")) if draw(st.booleans()) else ""
    chunks = []
    for n in range(draw(st.integers(0, 4))):
        text = draw(blocks(f"c{n}"))
        if draw(st.booleans()):
            text += "\n\n---\n\nTurn Context (split turn):\n" + draw(blocks(f"s{n}"))
        chunks.append(entry(10 * n + 1, 10 * n + 10, text))
    return rolling, recent(*chunks)


def ranked(rolling: str, chunks: Recent) -> list[SummaryItem]:
    return sorted(summary_items(rolling, chunks), key=lambda item: item.rank)


def kept_items(rolling: str, chunks: Recent, fitted: list[str]) -> list[bool]:
    """Per item (in rank order): is it in ``fitted``? (content lines are unique by their tags)"""
    out_lines = set(fitted)
    kept = []
    for item in ranked(rolling, chunks):
        present = [shown_line(rolling, chunks, item, n) in out_lines for n in range(len(item.lines))]
        assert len(set(present)) == 1, "an item was cut in the middle"
        kept.append(present[0])
    return kept


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=summaries(), share=st.floats(0.0, 1.2))
def test_the_fit_is_a_prefix_of_the_priority_order_within_budget(
    parts: tuple[str, Recent], share: float
) -> None:
    rolling, chunks = parts
    text = summary_md(rolling, [entry(int(c.split("_")[1]), int(c.split("_")[2]), t) for c, t, _ in chunks])
    if not rolling.strip() and not chunks:
        text = ""  # before the first compaction there is no summary.md
    budget = int(estimate_tokens(text) * share)
    fit = fit_summary_layer(rolling, chunks, budget)
    assert estimate_tokens(fit.text) <= budget
    assert fit.trimmed == (estimate_tokens(text) > budget)
    assert fit_summary_layer(rolling, chunks, budget) == fit  # deterministic
    if not fit.trimmed:
        assert fit.text == text  # what fits is summary.md as the store renders it
        return
    out = fit.text.splitlines()
    if out:
        assert out[-1].startswith(OMITTED_NOTE_PREFIX)
        out = out[:-1]
    # Every other line is a line of summary.md, in order.
    source = iter(text.splitlines())
    assert all(any(line == candidate for candidate in source) for line in out)
    # A higher-priority item is never dropped while a lower-priority one is kept.
    kept = kept_items(rolling, chunks, out)
    assert kept == sorted(kept, reverse=True)
    by_rank = ranked(rolling, chunks)
    assert fit.omitted_lines == sum(len(item.lines) for item, k in zip(by_rank, kept, strict=True) if not k)
    # ... in the terms of #19 and #38: noise goes first, then lines without content; the goal last.
    kept_of = {(item.part, item.lines[0]): k for item, k in zip(by_rank, kept, strict=True)}
    items = summary_items(rolling, chunks)

    def all_kept(test: Callable[[SummaryItem], bool]) -> bool:
        return all(kept_of[i.part, i.lines[0]] for i in items if test(i))

    def any_kept(test: Callable[[SummaryItem], bool]) -> bool:
        return any(kept_of[i.part, i.lines[0]] for i in items if test(i))

    newest = max((i.chunk for i in items if i.chunk), key=lambda c: int(c.split("_")[1]), default="")

    def noise(i: SummaryItem) -> bool:  # the newest chunk's Files line is not noise
        return i.section in ("Tool results", "Commands") or (i.section == "Files" and i.chunk != newest)

    if any_kept(lambda i: i.section == "Commands"):
        assert all_kept(lambda i: i.section != "Commands")
    if any_kept(noise):
        assert all_kept(lambda i: not noise(i))
    def resume(i: SummaryItem) -> bool:
        return not i.chunk and i.section in ("Goal", "Must keep")

    if any_kept(lambda i: not resume(i)):
        assert all_kept(resume)
    if any_kept(lambda i: i.chunk != newest and not resume(i)):
        assert all_kept(lambda i: i.chunk == newest and not noise(i))
    # Kept lines stand under their own chunk entry and below the headings they stood under.
    entry_at = [n for n, line in enumerate(out) if line.startswith("- **chunk_")]
    for item in items:
        if kept_of[item.part, item.lines[0]]:
            at = out.index(shown_line(rolling, chunks, item))
            start = max((n for n in entry_at if n < at), default=0)
            assert (out[start][4:].split("*")[0] if start in entry_at else "") == item.chunk
            for parent in item.parents:
                heading = shown_line(rolling, chunks, SummaryItem(item.part, (parent,), (), "", "", ()))
                assert heading in out[start:at]


# --- through Memory.build_messages ------------------------------------------------------


def chunk_summary(n: int) -> str:
    commands = "\n".join(f"- read_file(path=src/gateway/module_{n}_{m}.py)" for m in range(18))
    return f"Open thread:\n- now at step {n}: check the queue handling\nCommands:\n{commands}"


@pytest.mark.anyio
async def test_the_prompt_keeps_every_open_thread_and_drops_the_oldest_commands(tmp_path: Path) -> None:
    rng = random.Random(4)
    cfg = Config(context_window=8000, durability="none")
    # Every summarizer call (chunk, split-turn prefix, session summary) answers one numbered summary.
    script = [chunk_summary(n) for n in range(1, 40)]
    async with aiden.open_memory(tmp_path, config=cfg, summarizer=ScriptedSummarizer(script)) as memory:
        for turn in range(6):
            await memory.begin_run(f"turn {turn}: continue", now=1000.0 + turn)
            for step in range(2):
                cid = f"t{turn}s{step}"
                await memory.append(
                    SessionEvent(type="tool_call", tool_name="run", tool_call_id=cid, tool_args="{}")
                )
                words = " ".join(f"w{rng.randrange(1000)}" for _ in range(700))
                await memory.append(SessionEvent(type="tool_result", tool_call_id=cid, content=words))
            await memory.commit_run(f"turn {turn} done")
            await memory.maintain(manual=True)
        summary = await memory.summary_md()
        index = await memory.chunk_index()
        built = await memory.build_messages()
    assert estimate_tokens(summary) > cfg.summary_layer_tokens()
    assert built.summary_trimmed
    system = str(built.messages[0]["content"])
    lines = summary.splitlines()
    threads = [line for line in lines if "- now at step" in line]
    assert len(threads) >= 6 and all(line in system for line in threads)
    # A newer chunk's commands are kept before an older one's (the old cut kept the oldest only).
    chunks = recent(*index.chunks[-cfg.summary_max_chunks :])
    share: dict[str, list[bool]] = {}
    for item in summary_items(index.rolling_summary, chunks):
        if item.section == "Commands":
            share.setdefault(item.chunk, []).append(shown_line(index.rolling_summary, chunks, item) in system)
    kept = [sum(flags) / len(flags) for flags in share.values()]  # oldest chunk first
    assert len(kept) >= 3 and kept == sorted(kept) and kept[0] < 1.0 and kept[-1] == 1.0
    dropped = sum(flags.count(False) for flags in share.values())
    assert f"{OMITTED_NOTE_PREFIX}Commands ({dropped} lines)." in system


@pytest.mark.anyio
async def test_a_fact_the_fit_leaves_out_is_found_by_recall(tmp_path: Path) -> None:
    # #38: when the summary layer must shrink, what it drops stays findable by recall.
    cfg = Config(
        context_window=8000, durability="none", summary_layer_percent=1.5, keep_recent_tokens=60, hot_window_events=4
    )
    ports = {n: 8100 + 37 * n for n in range(16)}
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        for n, port in ports.items():
            await memory.append(SessionEvent(type="user_input", content=f"Where does service{n} listen?"))
            await memory.append(
                SessionEvent(
                    type="assistant_output",
                    content=f"Decision: service{n} listens on port {port} in staging, behind the gateway.",
                )
            )
            if n % 4 == 3:
                await memory.maintain(manual=True)
        summary = await memory.summary_md()
        built = await memory.build_messages()
        prompt = "\n".join(str(m.get("content") or "") for m in built.messages)
        dropped = [n for n, port in ports.items() if str(port) in summary and str(port) not in prompt]
        found = {n: await memory.recall_session_chunks(f"which port does service{n} listen on") for n in dropped}
    assert built.summary_trimmed and len(dropped) >= 3
    assert [n for n in dropped if not any(str(ports[n]) in hit.text for hit in found[n])] == []
