"""Constrained decoding: the one-call answer's JSON schema sent as ``response_format`` (issue #19).

Through litellm's real HTTP client and FakeLLMServer: what reaches the server
in each mode, that the schema is the answer the parser reads (keys, nesting,
bounds, the prompt's order) and that a conforming answer is read whole.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.summarizers.llm.schema import (
    ASKED_ITEMS,
    ITEM_CHARS,
    SCALAR_CHARS,
    StructuredOutput,
    answer_schema,
    response_format,
)
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary, SummaryRequest
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("litellm_ready"), pytest.mark.anyio]

PROMPTS = Path(__file__).resolve().parents[2] / "aiden" / "summarizers" / "prompts"


@pytest.fixture
def anyio_backend() -> str:
    """trio on the real clock: HTTP runs in a thread."""
    return "trio"


EVENTS = (
    SessionEvent(
        type="user_input", seq=1, content="Migrate billing to Postgres 16. Never touch prod directly."
    ),
    SessionEvent(
        type="assistant_output", seq=2, content="I chose logical replication because it avoids downtime."
    ),
)
ANSWER: dict[str, Any] = {
    "user_goal": "Migrate billing to Postgres 16.",
    "outcome": "",
    "decisions": [{"what": "logical replication", "why": "it avoids downtime"}],
    "constraints": [],
    "user_preferences": ["Never touch prod directly."],
    "errors": [{"error": "ImportError: psycopg", "resolution": ""}],
    "failed_approaches": [],
    "open_threads": [],
    "files_touched": [],
    "working_recipes": [],
    "facts": [],
}


def summarizer(server: FakeLLMServer, mode: StructuredOutput) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/test-model",
        config=Config(summarizer_retries=0),
        api_base=server.base_url,
        api_key="sk-test",
        structured_output=mode,
    )


@pytest.mark.parametrize("mode", ["prompt", "json_object", "json_schema"])
async def test_the_answer_requests_carry_the_schema_and_the_fold_does_not(mode: StructuredOutput) -> None:
    with FakeLLMServer(script=[json.dumps(ANSWER)] * 2) as server:
        subject = summarizer(server, mode)
        session = await subject.summarize(SummaryRequest(purpose="session_summary", events=EVENTS))
        # A history request over other events is its own call (not the memo's).
        later = tuple(msgspec.structs.replace(e, seq=e.seq + 10) for e in EVENTS)
        await subject.summarize(SummaryRequest(purpose="history", events=later))
        await subject.summarize(SummaryRequest(purpose="rolling_fold", text="Goal: x", previous_summary="y"))
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 2  # the fold is answered without a call in the one-call mode
    expected = response_format(mode)
    assert [b.get("response_format") for b in bodies] == [expected, expected]
    assert session.structured.decisions == (Decision(what="logical replication", why="it avoids downtime"),)
    assert subject.stats().fallbacks == 0


def test_the_two_spellings() -> None:
    schema = answer_schema()
    assert response_format("prompt") is None
    assert response_format("json_object") == {"type": "json_object", "schema": schema}
    assert response_format("json_schema") == {
        "type": "json_schema",
        "json_schema": {"name": "compaction_summary", "strict": True, "schema": schema},
    }


def test_the_schema_is_the_struct_the_parser_reads_in_the_prompts_order() -> None:
    schema = answer_schema()
    fields = {f.name for f in msgspec.structs.fields(StructuredSummary)}
    assert set(schema["properties"]) == fields
    assert schema["required"] == list(schema["properties"])  # strict mode: every key required
    decisions, errors = schema["properties"]["decisions"]["items"], schema["properties"]["errors"]["items"]
    assert decisions["required"] == [f.name for f in msgspec.structs.fields(Decision)]
    assert errors["required"] == [f.name for f in msgspec.structs.fields(ErrorResolution)]
    # A grammar emits the keys in the schema's order: the prompt shows the same order.
    prompt = (PROMPTS / "compaction.md").read_text(encoding="utf-8")
    assert re.findall(r'^  "(\w+)":', prompt, flags=re.MULTILINE) == list(schema["properties"])
    # A conforming answer decodes to the struct.
    jsonschema.validate(ANSWER, schema)
    assert msgspec.convert(ANSWER, StructuredSummary).user_goal == "Migrate billing to Postgres 16."


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"user_goal": "g" * (SCALAR_CHARS + 1)}, "is too long"),
        ({"facts": ["f" * (ITEM_CHARS + 1)]}, "is too long"),
        ({"facts": ["f"] * (ASKED_ITEMS + 1)}, "is too long"),
        ({"decisions": [{"what": "x"}]}, "'why' is a required property"),
        ({"mood": "fine"}, "Additional properties are not allowed"),
    ],
)
def test_the_schema_bounds_what_a_constrained_model_can_write(change: dict[str, Any], why: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=re.escape(why)):
        jsonschema.validate({**ANSWER, **change}, answer_schema())


def test_bad_settings_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="needs one_call_per_compaction"):
        LiteLLMSummarizer("openai/m", structured_output="json_object", one_call_per_compaction=False)
    with pytest.raises(ValueError, match="structured_output or extra_kwargs"):
        LiteLLMSummarizer(
            "openai/m", structured_output="json_schema", extra_kwargs={"response_format": {"type": "text"}}
        )
    with pytest.raises(ValueError, match="structured_output must be"):
        LiteLLMSummarizer("openai/m", structured_output="xml")  # type: ignore[arg-type]
