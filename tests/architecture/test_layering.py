"""Which room may import which (#36): policy stays pure, storage stays below summaries and the prompt.

- the vocabulary (``aiden.events``, ``aiden.config``, ``aiden.errors``) imports only itself;
- ``aiden.context`` (the prompt) imports only the vocabulary, policy and itself;
- ``aiden.policy`` imports only ``aiden.events``, ``aiden.config`` and itself:
  policy is pure and synchronous, and what it decides about comes in as plain data;
- ``aiden.storage`` never imports ``aiden.context`` (the prompt) nor ``aiden.summarizers``:
  summary.md's text is rendered by policy, and the rolling fold comes from the compaction side;
- the core never imports an extension (:data:`EXTENSIONS`). Extensions attach by name: the runtime
  builds the ``aiden.extensions`` entry points' extensions and runs the memory class it is given,
  and the store selection opens the ``aiden.stores`` entry points' stores. The public facades
  (``aiden``, ``aiden.memory``: ``Memory`` with long-term and experience memory's methods,
  ``aiden.sync``) put extensions together for users and are not the core;
  the core imports no facade either (else it would reach an extension through it).
"""

from __future__ import annotations

import fnmatch
from importlib.metadata import entry_points

from aiden.extension import EXTENSIONS_GROUP, installed
from tests.architecture.graph import import_graph

POLICY_MAY_IMPORT = ("aiden.events", "aiden.config", "aiden.policy")

EXTENSIONS: dict[str, tuple[str, ...]] = {
    "long-term memory": ("aiden.longterm", "aiden.longterm.*"),
    "experience memory": ("aiden.experience", "aiden.experience.*"),
    "PostgreSQL": ("aiden.storage.postgres", "aiden.storage.postgres.*"),
    "litellm": ("aiden.summarizers.llm", "aiden.summarizers.llm.*"),
    "adapters": ("aiden.adapters", "aiden.adapters.*", "aiden.langgraph_store", "aiden.mcp", "aiden.mcp.*"),
    "OpenTelemetry": ("aiden.otel",),
    "CLI": ("aiden.__main__", "aiden.cli", "aiden.demo", "aiden.doctor", "aiden.readonly"),
}
FACADES = frozenset({"aiden", "aiden.memory", "aiden.sync"})



def _in(module: str, *rooms: str) -> bool:
    return any(module == room or module.startswith(room + ".") for room in rooms)


def _edges(source: str, target: str) -> set[tuple[str, str]]:
    graph = import_graph()
    return {(a, b) for a, targets in graph.items() if _in(a, source) for b in targets if _in(b, target)}


def test_policy_imports_only_events_config_and_itself() -> None:
    graph = import_graph()
    outside = {
        (a, b)
        for a, targets in graph.items()
        if _in(a, "aiden.policy")
        for b in targets
        if not _in(b, *POLICY_MAY_IMPORT)
    }
    assert outside == set()
    assert graph["aiden.policy.cutpoints"] >= {
        "aiden.events",
        "aiden.config",
    }  # the walk sees policy's imports


def test_the_vocabulary_imports_only_itself() -> None:
    vocabulary = ("aiden.events", "aiden.config", "aiden.errors")
    graph = import_graph()
    assert {(a, b) for a in vocabulary for b in graph[a] if b not in vocabulary} == set()
    assert graph["aiden.events"] == {"aiden.errors"}  # the walk sees the vocabulary's own imports


def test_the_prompt_imports_only_the_vocabulary_and_policy() -> None:
    graph = import_graph()
    allowed = ("aiden.events", "aiden.config", "aiden.errors", "aiden.policy", "aiden.context")
    outside = {
        (a, b)
        for a, targets in graph.items()
        if _in(a, "aiden.context")
        for b in targets
        if not _in(b, *allowed)
    }
    assert outside == set()


def test_storage_never_imports_the_prompt() -> None:
    assert _edges("aiden.storage", "aiden.context") == set()


def test_storage_never_imports_the_summarizers() -> None:
    assert _edges("aiden.storage", "aiden.summarizers") == set()


def extension_of(module: str) -> str | None:
    """The extension ``module`` belongs to, ``None`` for the core (and the facades)."""
    for name, patterns in EXTENSIONS.items():
        if any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns):
            return name
    return None


def core_to_extension(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Core module -> the extensions it imports (the testing kit, a facade of its own, apart)."""
    found: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module in FACADES or extension_of(module) is not None or _in(module, "aiden.testing"):
            continue
        reached = {ext for target in targets if (ext := extension_of(target)) is not None}
        if reached:
            found[module] = reached
    return found


def test_every_extension_pattern_names_modules() -> None:
    modules = set(import_graph())
    for name, patterns in EXTENSIONS.items():
        for pattern in patterns:
            assert any(fnmatch.fnmatchcase(m, pattern) for m in modules), (name, pattern)


def test_the_core_imports_no_extension() -> None:
    assert core_to_extension(import_graph()) == {}


def test_the_core_imports_no_facade() -> None:
    graph = import_graph()
    core = {m for m in graph if m not in FACADES and extension_of(m) is None and not _in(m, "aiden.testing")}
    assert {(a, b) for a in core for b in graph[a] if b in FACADES} == set()


def test_a_core_import_of_an_extension_is_found() -> None:
    graph = {
        "aiden": {"aiden.longterm"},
        "aiden.recall.index": {"aiden.summarizers.llm.client", "aiden.events"},
        "aiden.summarizers.llm.client": {"aiden.errors"},
        "aiden.longterm": {"aiden.recall.index"},
        "aiden.testing.kit": {"aiden.storage.postgres"},
    }
    assert core_to_extension(graph) == {"aiden.recall.index": {"litellm"}}


def test_long_term_and_experience_memory_attach_by_name() -> None:
    found = {ep.name: ep.value for ep in entry_points(group=EXTENSIONS_GROUP)}
    assert found == {
        "experience": "aiden.experience.extension:ExperienceExtension",
        "long_term": "aiden.longterm.extension:LongTermExtension",
    }
    assert [make.__name__ for make in installed()] == ["ExperienceExtension", "LongTermExtension"]
