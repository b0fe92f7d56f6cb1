"""``aiden compact --context-window N``: that window for the call only; the agent's record stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiden.cli import main
from aiden.config import Config
from aiden.policy.triggers import trigger_threshold_tokens


def test_compact_at_another_window_leaves_the_agents_record(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    window = root / "memory/window.json"
    before = window.read_bytes()
    assert json.loads(before)["context_window"] == Config().context_window
    code = main(["compact", str(root), "--context-window", "50000", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["trigger"]["tokens_at"] == trigger_threshold_tokens(50_000, Config())  # compacted for 50000
    assert window.read_bytes() == before
