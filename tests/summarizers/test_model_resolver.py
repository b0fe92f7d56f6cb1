"""ModelResolver reads litellm's bundled model map without importing litellm; packaging stays lazy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiden.config import ModelResolver

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=False
    )


def test_known_models_from_the_bundled_map(capsys: pytest.CaptureFixture[str]) -> None:
    resolver = ModelResolver()
    assert resolver.context_window("gpt-4o", 1) == 128000
    assert resolver.context_window("openai/gpt-4o", 1) == 128000
    assert resolver.lookup("gpt-4o") == 128000
    assert capsys.readouterr() == ("", "")


def test_unknown_model_falls_back_silently(capsys: pytest.CaptureFixture[str]) -> None:
    resolver = ModelResolver()
    assert resolver.context_window("no-such-provider/no-such-model", 32000) == 32000
    assert resolver.context_window(None, 777) == 777
    assert resolver.context_window("", 5) == 5
    assert resolver.lookup("no-such-model") is None
    assert capsys.readouterr() == ("", "")


def test_custom_map_prefers_max_input_tokens_and_strips_provider_prefixes(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(
        json.dumps(
            {
                "sample_spec": {"max_input_tokens": "max input tokens, if the provider specifies it"},
                "m-input": {"max_input_tokens": 1000, "max_tokens": 50},
                "m-total": {"max_tokens": 2000},
                "m-bad": {"max_input_tokens": -1, "max_tokens": True},
                "eu/m-regional": {"max_input_tokens": 3000},
            }
        )
    )
    resolver = ModelResolver(path=path, overrides={"m-override": 9})
    assert resolver.context_window("m-input", 0) == 1000
    assert resolver.context_window("openai/m-total", 0) == 2000
    assert resolver.context_window("m-bad", 0) == 0
    assert resolver.context_window("sample_spec", 0) == 0
    assert resolver.context_window("azure/eu/m-regional", 0) == 3000
    assert resolver.context_window("vendor/m-override", 0) == 9


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]"])
def test_missing_or_broken_map_falls_back(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "map.json"
    if content is not None:
        path.write_text(content)
    assert ModelResolver(path=path).context_window("gpt-4o", 4321) == 4321


def test_resolver_never_imports_litellm_nor_prints() -> None:
    out = run_python(
        "import sys\n"
        "from aiden.config import ModelResolver\n"
        "assert ModelResolver().context_window('gpt-4o', 1) == 128000\n"
        "assert 'litellm' not in sys.modules\n"
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_importing_the_summarizers_does_not_import_litellm() -> None:
    out = run_python(
        "import sys\n"
        "import aiden, aiden.config, aiden.testing\n"
        "assert 'litellm' not in sys.modules\n"
        "assert 'aiden.summarizers.llm' not in sys.modules\n"
        "cls = aiden.LiteLLMSummarizer\n"
        "s = cls('openai/gpt-4o')\n"
        "assert 'litellm' not in sys.modules\n"
        "print(cls.__name__, aiden.config.ModelResolver().context_window('gpt-4o', 0))\n"
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "LiteLLMSummarizer 128000\n", "")
