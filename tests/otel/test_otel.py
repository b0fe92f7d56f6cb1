"""OpenTelemetry: one span per operation with the documented attributes, metrics, no content by default."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason="the otel extra is not installed (pip install 'aiden-memory[otel]')"
)

from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import aiden
from aiden import otel
from tests.helpers import SMALL_MANUAL

FACT = "the staging cluster runs kubernetes 1.29"


class Telemetry:
    def __init__(self, capture_content: bool | None) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.instrumentor = otel.instrument(
            tracer_provider=provider,
            meter_provider=MeterProvider(metric_readers=[self.reader]),
            capture_content=capture_content,
        )

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = [
                        (
                            dict(p.attributes or {}),
                            getattr(p, "value", None) if hasattr(p, "value") else p.count,
                        )
                        for p in metric.data.data_points
                    ]
        return found


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry(capture_content=None)
    yield t
    otel.uninstrument()


async def session(root: Path) -> None:
    """One of each operation: an append batch, a compaction, recall, save, forget, a prompt, Dream, learning."""
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="start the task"))
        await memory.append_many(
            [aiden.SessionEvent(type="user_input", role="user", content=FACT)]
            + [
                aiden.SessionEvent(type="assistant_output", role="assistant", content=f"step {n}")
                for n in range(12)
            ]
        )
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted
        hits = await memory.recall_session_chunks("kubernetes version")
        assert [h.text for h in hits][:1] == [FACT]
        saved = await memory.handle_tool_call(
            "save_memory", {"type": "fact", "title": "cluster", "content": FACT, "id": "cluster-1"}
        )
        assert json.loads(saved)["saved"]["id"] == "cluster-1"
        assert json.loads(await memory.handle_tool_call("forget_memory", {"id": "cluster-1"})) == {
            "forgotten": "cluster-1"
        }
        assert "error" in json.loads(await memory.handle_tool_call("forget_memory", {"id": "cluster-1"}))
        await memory.build_messages()
        await memory.dream()
        await memory.begin_run("deploy the cluster")
        await memory.commit_run("deployed", outcome="success")
        await memory.learn_experience()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.anyio
async def test_one_span_per_operation_with_its_attributes(tmp_path: Path, telemetry: Telemetry) -> None:
    await session(tmp_path)
    appends = telemetry.spans("aiden.append")
    # The two appends, then begin_run's user input and commit_run's answer.
    assert [attrs(s)["aiden.append.events"] for s in appends] == [1, 13, 1, 1]
    # The manual pass, and the background pass commit_run requests (when it ran before the close).
    compaction, *background = telemetry.spans("aiden.compaction")
    assert [
        (attrs(s)["aiden.compaction.manual"], attrs(s)["aiden.compaction.reason"]) for s in background
    ] in (
        [],
        [(False, "not_triggered")],
    )
    c = attrs(compaction)
    assert c["aiden.compaction.compacted"] is True
    assert c["aiden.compaction.reason"] == "manual"
    assert c["aiden.compaction.manual"] is True
    assert c["aiden.compaction.tokens_before"] > c["aiden.compaction.tokens_after"] > 0
    assert c["aiden.compaction.events"] > 0
    assert c["aiden.compaction.summarizer.calls"] >= 1
    assert c["aiden.compaction.summarizer.failures"] == 0
    [search] = telemetry.spans("search_memory")
    assert attrs(search) == {
        "gen_ai.provider.name": "aiden",
        "gen_ai.operation.name": "search_memory",
        "gen_ai.memory.store.id": "session",
        "gen_ai.memory.record.count": 1,
    }
    [save] = telemetry.spans("update_memory")
    assert attrs(save) == {
        "gen_ai.provider.name": "aiden",
        "gen_ai.operation.name": "update_memory",
        "gen_ai.memory.store.id": "long_term",
        "gen_ai.memory.record.id": "cluster-1",
        "gen_ai.memory.record.count": 1,
    }
    forgot, missing = telemetry.spans("delete_memory")
    assert attrs(forgot)["gen_ai.memory.record.count"] == 1
    assert attrs(missing)["error.type"] == "tool_error"
    assert forgot.status.status_code.name == "UNSET"
    assert missing.status.status_code.name == "ERROR"
    [build] = telemetry.spans("aiden.build_messages")
    assert attrs(build)["aiden.prompt.messages"] >= 2
    assert attrs(build)["aiden.prompt.estimated_tokens"] > 0
    [dream] = telemetry.spans("aiden.dream")
    assert {k: v for k, v in attrs(dream).items() if k.startswith("aiden.")} == {
        "aiden.dream.ran": True,
        "aiden.dream.records": 1,
        "aiden.dream.edits": 1,
    }
    [learn] = telemetry.spans("aiden.learn")
    assert attrs(learn)["aiden.learn.limit"] == 16
    assert attrs(learn)["aiden.learn.episodes"] == 1
    # No content by default: no attribute carries the fact or the query.
    values = json.dumps([attrs(s) for s in telemetry.spans()])
    assert "kubernetes" not in values
    assert "gen_ai.memory.query.text" not in values
    metrics = telemetry.metrics()
    assert metrics["aiden.compactions"] == [({"aiden.compaction.degraded": False}, 1)]
    assert ({"aiden.compaction.reason": "manual"}, 1) in metrics["aiden.compaction.passes"]
    durations = dict((a["aiden.operation"], n) for a, n in metrics["aiden.operation.duration"])
    assert durations["search_memory"] == 1
    assert durations["compaction"] >= 1
    assert {v for _, v in metrics["aiden.operations.in_flight"]} == {0}


@pytest.mark.anyio
async def test_content_only_when_opted_in(tmp_path: Path) -> None:
    telemetry = Telemetry(capture_content=True)
    try:
        await session(tmp_path)
    finally:
        otel.uninstrument()
    [search] = telemetry.spans("search_memory")
    assert attrs(search)["gen_ai.memory.query.text"] == "kubernetes version"
    [save] = telemetry.spans("update_memory")
    assert json.loads(attrs(save)["gen_ai.memory.records"]) == [
        {"id": "cluster-1", "content": FACT, "metadata": {"title": "cluster"}}
    ]


@pytest.mark.anyio
async def test_uninstrument_stops_reporting(tmp_path: Path) -> None:
    telemetry = Telemetry(capture_content=None)
    otel.uninstrument()
    await session(tmp_path)
    assert telemetry.spans() == []


_NO_OTEL = """
import sys, anyio, aiden
async def main():
    async with aiden.open_memory(sys.argv[1]) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="hello"))
        await memory.recall_session_chunks("hello")
        await memory.build_messages()
anyio.run(main)
import aiden.otel, aiden.cli
try:
    aiden.cli.main(["mcp", "--help"])  # the aiden command, its mcp subcommand included
except SystemExit:
    pass
optional = {"opentelemetry", "mcp", "mcp_types", "langgraph", "starlette", "uvicorn"}
print(sorted(m for m in sys.modules if m.split(".")[0] in optional))
"""

_ABSENT = """
import sys
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
import aiden.otel
print(aiden.otel.instrument())
"""


def test_import_aiden_imports_no_optional_integration(tmp_path: Path) -> None:
    """Neither OpenTelemetry, the MCP SDK nor LangGraph load with aiden, its operations or its command."""
    out = subprocess.run(
        [sys.executable, "-c", _NO_OTEL, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.splitlines()[-1] == "[]"


def test_instrument_is_a_no_op_without_opentelemetry() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _ABSENT], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == "None\n"
    assert "OpenTelemetry is not importable" in out.stderr


ANSWER = {
    "user_goal": "Upgrade the cluster",
    "text": "Goal: Upgrade the cluster\nFacts:\n- the staging cluster runs kubernetes 1.29",
}


def test_summarizer_calls_report_their_tokens_to_the_compaction(tmp_path: Path) -> None:
    import anyio

    from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
    from aiden.testing import FakeLLMServer

    reply = {"content": json.dumps(ANSWER), "usage": {"prompt_tokens": 100, "completion_tokens": 20}}
    telemetry = Telemetry(capture_content=None)
    try:
        with FakeLLMServer(lambda body: reply) as server:
            summarizer = LiteLLMSummarizer("openai/test-model", api_base=server.base_url, api_key="sk-test")

            async def run() -> None:
                async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, summarizer=summarizer) as memory:
                    await memory.append(aiden.SessionEvent(type="user_input", role="user", content="start"))
                    await memory.append_many(
                        aiden.SessionEvent(
                            type="assistant_output", role="assistant", content=f"{FACT} step {n}"
                        )
                        for n in range(12)
                    )
                    assert (await memory.maintain(manual=True)).compacted

            anyio.run(run)
            requests = len(server.requests)
    finally:
        otel.uninstrument()
    calls = telemetry.spans("aiden.summarize")
    assert calls
    assert {attrs(s)["gen_ai.request.model"] for s in calls} == {"openai/test-model"}
    assert sum(attrs(s)["gen_ai.usage.input_tokens"] for s in calls) == 100 * requests
    assert sum(attrs(s)["gen_ai.usage.output_tokens"] for s in calls) == 20 * requests
    manual = [s for s in telemetry.spans("aiden.compaction") if attrs(s)["aiden.compaction.manual"]]
    [compaction] = manual
    # The pass reports the tokens of the calls made while it ran (its running-summary merge included).
    during = [s for s in calls if compaction.start_time <= s.start_time and s.end_time <= compaction.end_time]  # type: ignore[operator]
    assert during
    assert attrs(compaction)["aiden.compaction.summarizer.input_tokens"] == sum(
        attrs(s)["gen_ai.usage.input_tokens"] for s in during
    )
    assert attrs(compaction)["aiden.compaction.summarizer.output_tokens"] == sum(
        attrs(s)["gen_ai.usage.output_tokens"] for s in during
    )
    assert attrs(compaction)["aiden.compaction.summarizer.input_tokens"] > 0
    tokens = dict((a["gen_ai.token.type"], v) for a, v in telemetry.metrics()["aiden.summarizer.tokens"])
    assert tokens == {"input": 100 * requests, "output": 20 * requests}


def test_a_failed_operation_is_an_error_span_with_its_error_type() -> None:
    import anyio

    from aiden.errors import SummarizerError
    from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
    from aiden.summarizers.protocol import SummaryRequest
    from aiden.testing import FakeLLMServer

    telemetry = Telemetry(capture_content=None)
    try:
        with FakeLLMServer(lambda body: {"status": 400, "error": "bad request"}) as server:
            summarizer = LiteLLMSummarizer(
                "openai/test-model",
                api_base=server.base_url,
                api_key="sk-test",
                one_call_per_compaction=False,
            )
            request = SummaryRequest(purpose="rolling_fold", text="the staging cluster runs kubernetes 1.29")
            with pytest.raises(SummarizerError) as raised:
                anyio.run(summarizer.summarize, request)
    finally:
        otel.uninstrument()
    [span] = telemetry.spans("aiden.summarize")
    assert span.status.status_code.name == "ERROR"
    assert attrs(span)["error.type"] == type(raised.value).__qualname__
    assert attrs(span)["aiden.summarize.purpose"] == "rolling_fold"


class _BrokenProcessor(SpanProcessor):
    """A span processor with a bug: the SDK runs it unguarded at a span's start or end."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.where == "on_start":
            raise KeyError("enrichment bug")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where == "on_end":
            raise KeyError("enrichment bug")


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["on_start", "on_end"])
async def test_a_raising_span_processor_changes_nothing_the_memory_does(tmp_path: Path, where: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(_BrokenProcessor(where))
    instrumentor = otel.instrument(tracer_provider=provider)
    assert instrumentor is not None
    try:
        async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
            stored = await memory.append(aiden.SessionEvent(type="user_input", role="user", content="deploy"))
            await memory.append_many(
                aiden.SessionEvent(type="assistant_output", role="assistant", content=f"step {n}") for n in range(12)
            )
            outcome = await memory.maintain(manual=True)
            after = await memory.append(aiden.SessionEvent(type="user_input", role="user", content="next"))
            hot = [(e.seq, e.content) for e in await memory.hot_window()]
        # An operation's own error comes out as it is, once.
        calls: list[str] = []

        async def failing() -> None:
            calls.append("called")
            raise aiden.StorageError("disk full")

        with pytest.raises(aiden.StorageError, match="disk full"):
            await instrumentor.around("build_messages", failing, (), {})
        assert calls == ["called"]
    finally:
        otel.uninstrument()
    assert stored.seq == 1
    assert outcome.compacted
    assert after.seq == 14
    assert hot[0] == (1, "deploy")
    assert hot[-1] == (14, "next")
    names = [s.name for s in exporter.get_finished_spans()]
    # A span whose processor failed at its start is not recorded; one failing at its end is.
    assert names.count("aiden.compaction") == (0 if where == "on_start" else 1)
