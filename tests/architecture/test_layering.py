"""Which room may import which (#36): policy stays pure, storage stays below summaries and the prompt.

- the vocabulary (``aiden.events``, ``aiden.config``, ``aiden.errors``) imports only itself;
- ``aiden.context`` (the prompt) imports only the vocabulary, policy and itself;
- ``aiden.policy`` imports only ``aiden.events``, ``aiden.config`` and itself:
  policy is pure and synchronous, and what it decides about comes in as plain data;
- ``aiden.storage`` never imports ``aiden.context`` (the prompt) nor ``aiden.summarizers``:
  summary.md's text is rendered by policy, and the rolling fold comes from the compaction side.
"""

from __future__ import annotations

from tests.architecture.graph import import_graph

POLICY_MAY_IMPORT = ("aiden.events", "aiden.config", "aiden.policy")



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
