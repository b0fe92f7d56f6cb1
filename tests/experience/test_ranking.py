"""How recall_experience orders index rows (aiden.experience.recordstore): BM25, fusion, working steps first."""

from __future__ import annotations

from aiden.experience.records import RecordKind, RecordRow
from aiden.experience.recordstore import bm25, nearest, rank


def row(
    rid: str,
    terms: tuple[str, ...],
    *,
    kind: RecordKind = "procedure",
    goal: str = "build",
    task_terms: tuple[str, ...] = (),
    updated_at: float = 1.0,
) -> RecordRow:
    return RecordRow(
        id=rid,
        kind=kind,
        status="active",
        title=rid,
        environment="acme",
        goal=goal,
        terms=terms,
        task_terms=task_terms,
        created_at=1.0,
        updated_at=updated_at,
    )


def ids(rows: list[RecordRow]) -> list[str]:
    return [r.id for r in rows]


def test_bm25_needs_rows_and_terms() -> None:
    assert bm25([], ["make"]) == []
    assert bm25([row("a", ("make",))], []) == []


def test_bm25_weighs_task_terms_double_drops_rows_without_a_term_and_breaks_ties_newest_first() -> None:
    rows = [
        row("plain", ("make", "ssl")),
        row("task", ("make", "ssl"), task_terms=("make",)),
        row("none", ("lint",)),
        row("older", ("ssl", "make"), updated_at=0.5),
    ]
    assert ids(bm25(rows, ["make"])) == ["task", "plain", "older"]


def test_rank_puts_a_tasks_working_step_before_its_failure_and_keeps_the_groups_order() -> None:
    rows = [
        row("fail-build", ("make", "ssl", "make"), kind="failure"),
        row("proc-build", ("make", "docker", "cache", "flags")),
        row("fail-test", ("make", "pytest", "make", "make"), kind="failure", goal="test"),
        row("cal-test", ("pytest",), kind="calibration", goal="test"),
    ]
    # BM25 alone: fail-test, fail-build, proc-build (cal-test shares no term).
    assert ids(bm25(rows, ["make"])) == ["fail-test", "fail-build", "proc-build"]
    assert ids(rank(rows, ["make", "make"])) == ["fail-test", "proc-build", "fail-build"]


def test_rank_with_the_nearest_rows_can_lead_with_a_row_sharing_no_word() -> None:
    rows = [row("lexical", ("make",), goal="a"), row("semantic", ("compile",), goal="b")]
    assert ids(rank(rows, ["make"])) == ["lexical"]
    # Each leads one ranking (1/61 each): the tie goes to the higher position, the more recent row.
    assert ids(rank(rows, ["make"], near=[1])) == ["semantic", "lexical"]
    # Second in the vector ranking too, the lexical row gains 1/62 and leads.
    assert ids(rank(rows, ["make"], near=[1, 0])) == ["lexical", "semantic"]


def test_nearest_orders_by_cosine_ties_to_the_higher_position_and_limits() -> None:
    vectors = [(1.0, 0.0), (0.6, 0.8), (0.6, 0.8), (0.0, 1.0)]
    assert nearest(vectors, (0.0, 1.0)) == [3, 2, 1, 0]
    assert nearest(vectors, (1.0, 0.0), limit=2) == [0, 2]
