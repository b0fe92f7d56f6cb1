"""summary.md's render (:mod:`aiden.policy.summary_md`): entries, headings, steps and superseded lines (#19, #36)."""

from __future__ import annotations

from aiden.policy.summary_md import (
    match_heading,
    normalize,
    prune_superseded,
    render_entry,
    render_parts,
    render_summary,
    step_key,
    step_match,
)

OLD = (
    "Goal: migrate the gateway\n"
    "Commands:\n- $ pytest tests/gateway -q\n"
    "Open thread:\n- User: Continue with the gateway migration, step 23: move auth\n"
)
NEW = (
    "Commands:\n- $ pytest tests/gateway -q\n- $ ruff check\n"
    "Open thread:\n- User: Continue with the gateway migration, step 38: move billing\n\n"
    "---\n\nTurn Context (split turn):\nOpen thread:\n- User: Continue with the gateway migration, step 37: x"
)


def test_a_command_and_a_step_stay_only_at_their_newest_place() -> None:
    assert prune_superseded(["", OLD, NEW]) == [
        "",
        # Its command and its older step are newer elsewhere; their emptied headings go too.
        "Goal: migrate the gateway",
        # The split turn's older step goes, and with it the split-turn block it was alone in.
        "Commands:\n- $ pytest tests/gateway -q\n- $ ruff check\n"
        "Open thread:\n- User: Continue with the gateway migration, step 38: move billing",
    ]


def test_parts_with_nothing_superseded_are_returned_unchanged() -> None:
    parts = ["Facts:\n- a\nOpen thread:\n- User: please review the PR", "- **chunk_1**\nCommands:\n- $ make"]
    assert prune_superseded(parts) == parts


def test_an_item_with_continuation_lines_is_never_cut() -> None:
    continued = "Commands:\n- $ make\n  with a continuation line\n"
    assert prune_superseded([continued, "Commands:\n- $ make\n"]) == [continued, "Commands:\n- $ make\n"]


def test_a_heading_with_inline_text_stays_when_its_lines_go() -> None:
    assert prune_superseded(["Commands: $ make\n- $ make", "Commands:\n- $ make"]) == [
        "Commands: $ make",
        "Commands:\n- $ make",
    ]


def test_headings_are_known_spellings_with_a_colon_or_hashes() -> None:
    assert match_heading("Goal: x") == (True, "goal", "x")
    assert match_heading("## Facts") == (True, "facts", "")
    assert match_heading("Turn Context (split turn):") == (True, None, "")
    assert match_heading("Goal") == (False, None, "")  # a word, not a heading
    assert match_heading("Weird: x") == (False, None, "")
    assert match_heading("- **chunk_1**") == (False, None, "")


def test_a_numbered_request_has_a_step_key() -> None:
    assert step_key("Continue, steps 1\u20134; now at step 4: go") == (("continue", "step"), 4)
    assert step_key("Continue with part 2 of the Report") == (("continue with", "part"), 2)
    assert step_key("no number here") is None
    found = step_match("Continue, steps 1\u20134; now at step 4: go")
    assert found is not None and (found["word"], found["a"], found["b"], found["tail"]) == (
        "step",
        "1",
        "4",
        ": go",
    )
    assert normalize("  Hello,  World!  ") == "hello, world"


def test_summary_md_renders_the_rolling_summary_and_each_recent_entry() -> None:
    assert render_entry("chunk_1", "") == "- **chunk_1**\n"
    assert (
        render_entry("chunk_2", "Goal: x\n\n- y", degraded=True)
        == "- **chunk_2** (degraded)\n  Goal: x\n\n  - y\n"
    )
    assert (
        render_summary("", [])
        == "# Session History (compressed chunks)\n\n## Rolling Summary\n\n## Recent Chunks\n"
    )
    assert render_summary("Facts:\n- a", [("chunk_1", OLD, False), ("chunk_2", NEW, False)]) == (
        "# Session History (compressed chunks)\n\n## Rolling Summary\n\nFacts:\n- a\n\n## Recent Chunks\n\n"
        "- **chunk_1**\n  Goal: migrate the gateway\n\n"
        "- **chunk_2**\n  Commands:\n  - $ pytest tests/gateway -q\n  - $ ruff check\n"
        "  Open thread:\n  - User: Continue with the gateway migration, step 38: move billing\n"
    )


def test_without_the_skeleton_a_section_with_nothing_in_it_is_left_out() -> None:
    entry = [("chunk_1", "Goal: x", False)]
    assert render_parts("", entry, skeleton=False) == (
        "# Session History (compressed chunks)\n\n## Recent Chunks\n\n- **chunk_1**\n  Goal: x\n"
    )
    assert render_parts("Facts:\n- a", [], skeleton=False) == (
        "# Session History (compressed chunks)\n\n## Rolling Summary\n\nFacts:\n- a\n"
    )
    assert render_parts("Facts:\n- a", entry) == render_summary("Facts:\n- a", entry)
