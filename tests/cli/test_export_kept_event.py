"""``aiden export`` and ``aiden doctor`` on a session where a later chunk compacted an event an earlier one kept hot."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from aiden.cli import main
from tests.store.test_kept_event_compacted_later import PIN, pin_compacted_by_a_later_chunk


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """The root of :func:`pin_compacted_by_a_later_chunk`: chunks 2..8 (seq 3 kept hot) and 3..17 (holds seq 3)."""
    anyio.run(pin_compacted_by_a_later_chunk, tmp_path)
    return tmp_path


def test_export_gives_every_event_once_in_seq_order(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(session)]) == 0
    out = capsys.readouterr()
    events = [json.loads(line) for line in out.out.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, 21))
    assert events[2]["content"] == PIN
    assert out.err == ""


def test_doctor_finds_nothing_wrong(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(session), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["ok"], result["problems"]) == (True, [])
