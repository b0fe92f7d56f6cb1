"""Navigation records (#21): a location a run looked up and then used is where that thing is; later runs
confirm, dispute or supersede it (:mod:`aiden.experience.learner`)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from aiden.experience.episodes import Episode, EpisodeRecorder, attempts, corrected_after
from aiden.experience.learner import (
    MAX_PLACES,
    found_places,
    learn,
    locations,
    navigation_records,
    not_found,
    same_place,
)
from aiden.experience.records import ExperienceRecord

ENV = "repo-acme"
GREP = "grep -rl redis --include=*.yaml ."
FOUND = "./deploy/helm/values.yaml\n./services/acme/conf/redis.yaml\n./tests/fixtures/redis.yaml\n"
CONF = "services/acme/conf/redis.yaml"

Step = tuple[str, str, bool]  # command, output, ok


def run(eid: str, t: float, steps: list[Step], *, goal: str = "raise the acme redis timeout") -> Episode:
    rec = EpisodeRecorder(eid, goal=goal, environment=ENV, started_at=t)
    for n, (cmd, output, ok) in enumerate(steps):
        if cmd.startswith("USER: "):
            rec.correction(cmd[6:])
            continue
        rec.tool_call("shell", json.dumps({"cmd": cmd}), call_id=f"c{n}")
        rec.tool_result("shell", output, ok=ok, call_id=f"c{n}")
    rec.answer("done")
    return rec.finish("unknown", finished_at=t + 10)


def navigation(store: dict[str, ExperienceRecord]) -> dict[str, tuple[str, str]]:
    """Every navigation record's location and status, with its status reason's start."""
    return {
        r.step: (r.status, r.status_reason.split(" ")[0]) for r in store.values() if r.kind == "navigation"
    }


def apply(store: dict[str, ExperienceRecord], episode: Episode) -> tuple[ExperienceRecord, ...]:
    """Learn ``episode`` into ``store``; the navigation records it changed (a run of one working
    step also teaches a first-try procedure: not what these tests are about)."""
    lessons = learn(episode, list(store.values()))
    for record in lessons.records:
        store[record.id] = record
    return tuple(r for r in lessons.records if r.kind == "navigation")


def discovery(eid: str = "ep-1", t: float = 0.0) -> Episode:
    return run(
        eid,
        t,
        [
            (GREP, FOUND, True),
            (f"cat {CONF}", "host: localhost\nport: 6379\ntimeout: 5", True),
            (f"sed -i 's/timeout: 5/timeout: 10/' {CONF}", "", True),
        ],
    )


def test_a_location_looked_up_then_used_is_a_navigation_record_citing_both() -> None:
    lessons = learn(discovery(), [])
    (nav,) = (r for r in lessons.records if r.kind == "navigation")
    assert (nav.status, nav.title, nav.step, nav.goal, nav.environment, nav.tasks) == (
        "active",
        f"redis.yaml is at {CONF}",
        CONF,
        "",
        ENV,
        ("raise the acme redis timeout",),
    )
    assert [(e.episode_id, e.seqs) for e in nav.evidence] == [("ep-1", (1, 2, 3, 4))]
    assert nav.body == (
        f"`redis.yaml` is at `{CONF}`: `shell {GREP}` showed it and `shell cat {CONF}` used it, for "
        "'raise the acme redis timeout'. Verify against current observations before relying on it."
    )
    # The other files the search listed were never used: no record says where they are.
    assert [r.kind for r in lessons.records] == ["navigation"]
    assert lessons.groups == ()  # nothing for a model to phrase: the location is the lesson


def test_no_navigation_record_without_a_lookup_that_revealed_the_place_and_a_use_that_worked() -> None:
    cases: dict[str, list[Step]] = {
        "the use failed": [(GREP, FOUND, True), (f"cat {CONF}", "cat: permission denied", False)],
        "no use": [(GREP, FOUND, True), ("make test", "ok", True)],
        "the lookup failed (an error message is no lookup)": [
            ("grep -rl redis", f"error: binary file matches; see {CONF}", False),
            (f"cat {CONF}", "timeout: 5", True),
        ],
        "named before the lookup answered (it revealed nothing)": [
            (f"ls {CONF}", CONF, True),
            (f"cat {CONF}", "timeout: 5", True),
        ],
        "a user correction right after the use": [
            (GREP, FOUND, True),
            (f"cat {CONF}", "timeout: 5", True),
            ("USER: not that file, the one in deploy/", "", True),
        ],
        "the use came before the lookup": [(f"cat {CONF}", "timeout: 5", True), (GREP, FOUND, True)],
        "a bare word is no place": [("ls", "src\nMakefile\n", True), ("ls src", "app.py", True)],
    }
    for why, steps in cases.items():
        episode = run("ep-1", 0.0, steps)
        assert navigation_records(episode, attempts(episode), {}, expires_at=None) == [], why
    told = run("ep-2", 0.0, [(GREP, FOUND, True), (f"cat {CONF}", "timeout: 5", True)], goal=f"edit {CONF}")
    assert found_places(told, attempts(told)) == []  # the goal named it: nothing was looked for


def test_spellings_of_one_place_meet_and_the_use_spelling_is_kept() -> None:
    absolute = run(
        "ep-1",
        0.0,
        [
            ("grep -rln 'timeout' /srv/acme", f"/srv/acme/{CONF}:3:timeout: 5", True),
            ("read_file", "", True),  # an attempt naming nothing
            (f"cat ./{CONF}", "timeout: 5", True),
        ],
    )
    (place,) = found_places(absolute, attempts(absolute))
    assert (place.location, place.name, place.seqs) == (CONF, "redis.yaml", (1, 2, 5, 6))
    # A listing shows a bare file name; the use names it inside its directory.
    listed = run(
        "ep-2", 0.0, [("ls services/acme/conf", "redis.yaml\napp.toml", True), (f"cat {CONF}", "x", True)]
    )
    assert [p.location for p in found_places(listed, attempts(listed))] == [CONF]
    # A tool with structured (non-shell) arguments: every string value is read, nested ones too.
    rec = EpisodeRecorder("ep-3", goal="fetch the acme users", environment=ENV, started_at=0.0)
    rec.tool_call("search", json.dumps({"q": "users endpoint", "limit": 3}))
    rec.tool_result(
        "search", "Found: https://api.acme.dev/v2/users (docs) and https://api.acme.dev/v1", ok=True
    )
    rec.tool_call("http", json.dumps({"request": {"urls": ["https://api.acme.dev/v2/users"]}, "retry": True}))
    rec.tool_result("http", '{"users": []}', ok=True)
    episode = rec.finish("unknown", finished_at=5.0)
    assert [(p.location, p.name) for p in found_places(episode, attempts(episode))] == [
        ("https://api.acme.dev/v2/users", "users")
    ]


def test_a_directory_on_the_way_is_left_to_the_deeper_place_and_an_episode_is_bounded() -> None:
    deeper = run(
        "ep-1",
        0.0,
        [
            ("find . -type d -name conf", "./services/acme/conf", True),
            ("ls services/acme/conf", "redis.yaml", True),
            (f"cat {CONF}", "timeout: 5", True),
        ],
    )
    assert [p.location for p in found_places(deeper, attempts(deeper))] == [CONF]
    many = [f"pkg{i}/settings.toml" for i in range(MAX_PLACES + 3)]
    steps: list[Step] = [("find . -name settings.toml", "\n".join(many), True)]
    steps += [(f"cat {path}", "x = 1", True) for path in reversed(many)]
    episode = run("ep-2", 0.0, steps)
    # The first uses are kept.
    assert [p.location for p in found_places(episode, attempts(episode))] == many[::-1][:MAX_PLACES]


def test_later_runs_confirm_dispute_and_revive_a_place() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, discovery())
    (nav,) = (r for r in store.values() if r.kind == "navigation")
    # Used again straight away (recalled): confirmed, the episode is evidence, its task joins.
    apply(
        store, run("ep-2", 100.0, [(f"cat {CONF}", "timeout: 10", True)], goal="show the acme cache settings")
    )
    assert [(e.episode_id, e.seqs) for e in store[nav.id].evidence] == [
        ("ep-1", (1, 2, 3, 4)),
        ("ep-2", (1, 2)),
    ]
    assert store[nav.id].tasks == ("raise the acme redis timeout", "show the acme cache settings")
    # Failures that do not say the place is gone dispute nothing.
    for output in ("cat: permission denied", "bash: cat: command not found", "error: key not found", ""):
        assert apply(store, run("ep-3", 200.0, [(f"cat {CONF}", output, False)])) == (), output
    # Not found, naming it: disputed (a normal recall stops returning it).
    gone = f"cat: {CONF}: No such file or directory"
    apply(store, run("ep-4", 300.0, [(f"cat {CONF}", gone, False)]))
    assert (store[nav.id].status, store[nav.id].status_reason) == (
        "disputed",
        f"episode ep-4 seqs [1, 2]: `{CONF}` was not found",
    )
    assert apply(store, run("ep-5", 400.0, [(f"cat {CONF}", gone, False)])) == ()  # still gone: no change
    # It works again (restored from a branch): active again, the reason cleared.
    apply(store, run("ep-6", 500.0, [(f"cat {CONF}", "timeout: 10", True)]))
    assert (store[nav.id].status, store[nav.id].status_reason) == ("active", "")
    # Re-learning the last episode (a retried worker) changes nothing.
    assert apply(store, run("ep-6", 500.0, [(f"cat {CONF}", "timeout: 10", True)])) == ()


def moved(eid: str, t: float, old: str, new: str, *, tried_old: bool) -> Episode:
    steps: list[Step] = [(f"cat {old}", f"cat: {old}: No such file or directory", False)] if tried_old else []
    steps += [("find . -name redis.yaml", f"./{new}\n", True), (f"cat {new}", "timeout: 10", True)]
    return run(eid, t, steps)


def test_a_place_shown_gone_is_superseded_by_where_the_thing_is_now() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, discovery())
    # The file moved: the recalled path is not found, a search finds it elsewhere, that works.
    apply(store, moved("ep-2", 100.0, CONF, "config/cache/redis.yaml", tried_old=True))
    assert navigation(store) == {CONF: ("legacy", "moved:"), "config/cache/redis.yaml": ("active", "")}
    (old,) = (r for r in store.values() if r.step == CONF)
    assert (
        old.status_reason
        == "moved: `config/cache/redis.yaml` found and used in episode ep-2 seqs [3, 4, 5, 6]"
    )
    # A legacy place used again without a new lookup stays legacy; found again by a lookup, it is current.
    assert apply(store, run("ep-3", 200.0, [(f"cat {CONF}", "timeout: 10", True)])) == ()
    apply(store, discovery("ep-4", 300.0))
    assert navigation(store)[CONF] == ("active", "")


def test_a_disputed_place_is_superseded_later_but_a_same_name_file_elsewhere_is_not_evidence() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, discovery())
    # Another file of the same name found and used: the first one was never shown gone, both stand.
    apply(store, moved("ep-2", 100.0, CONF, "tests/fixtures/redis.yaml", tried_old=False))
    assert navigation(store) == {CONF: ("active", ""), "tests/fixtures/redis.yaml": ("active", "")}
    apply(store, run("ep-3", 200.0, [(f"cat {CONF}", f"cat: {CONF}: No such file or directory", False)]))
    assert navigation(store)[CONF] == ("disputed", "episode")
    # Found elsewhere in a later run: the disputed place is superseded.
    apply(store, moved("ep-4", 300.0, CONF, "config/redis.yaml", tried_old=False))
    assert navigation(store) == {
        CONF: ("legacy", "moved:"),
        "tests/fixtures/redis.yaml": ("active", ""),
        "config/redis.yaml": ("active", ""),
    }


def test_only_navigation_records_of_the_episode_environment_are_touched() -> None:
    store: dict[str, ExperienceRecord] = {}
    apply(store, discovery())
    (nav,) = store.values()
    elsewhere = msgspec.structs.replace(nav, id="navi-elsewhere", environment="repo-bolt")
    procedure = msgspec.structs.replace(nav, id="proc-x", kind="procedure")
    gone = run("ep-2", 100.0, [(f"cat {CONF}", f"cat: {CONF}: No such file or directory", False)])
    changed = navigation_records(
        gone, attempts(gone), {r.id: r for r in (nav, elsewhere, procedure)}, expires_at=None
    )
    assert [(r.id, r.status) for r in changed] == [(nav.id, "disputed")]


def test_location_shapes() -> None:
    text = (
        "./services/acme/conf/redis.yaml:3:  timeout: 5\n"
        "see config/app.yaml. e.g. i.e. 1/2 3.41s 0.0.0.0:8080 acme-1.4.0.tar.gz dist/ Makefile\n"
        "--config=conf/app.toml PYTHONPATH=src https://api.acme.dev/v1/users?x=1. ~/.bashrc ../up/a.txt\n"
        "127.0.0.1:8000/api"
    )
    assert locations(text) == (
        CONF,
        "config/app.yaml",
        "acme-1.4.0.tar.gz",
        "conf/app.toml",
        "https://api.acme.dev/v1/users?x=1",
        "~/.bashrc",
        "../up/a.txt",
    )
    assert locations("x" * 400 + ".yaml") == ()  # longer than a location
    assert same_place("conf/a.yaml", "/srv/conf/a.yaml") and same_place("/srv/conf/a.yaml", "conf/a.yaml")
    assert not same_place("oldconf/a.yaml", "conf/a.yaml")
    assert not_found("cat: conf/a.yaml: No such file or directory", "conf/a.yaml")
    assert not_found("HTTP 404", "https://api.acme.dev/v1/users")  # a URL's 404 need not repeat it
    assert not not_found("error: no such file: b.yaml", "conf/a.yaml")  # another file is missing
    assert not not_found("sh: yq: command not found (conf/a.yaml not read)", "conf/a.yaml")
    assert not not_found("error: invalid yaml in conf/a.yaml", "conf/a.yaml")
    # A non-JSON argument string is read as text.
    rec = EpisodeRecorder("ep-1", goal="g", environment=ENV, started_at=0.0)
    rec.tool_call("find", "redis")
    rec.tool_result("find", CONF, ok=True)
    rec.tool_call("open", f"open {CONF} read-only")
    rec.tool_result("open", "ok", ok=True)
    episode = rec.finish("unknown", finished_at=1.0)
    assert [p.seqs for p in found_places(episode, attempts(episode))] == [(1, 2, 3, 4)]


# --- invariants over random runs (hypothesis) ------------------------------------------------------
PLACES = ("services/acme/conf/redis.yaml", "config/cache/redis.yaml", "etc/app.toml")
HOW = st.sampled_from(("ok", "ok", "missing", "denied"))
# ("find", shown places, ok) | ("cat", place, "ok" / "missing" / "denied") | ("correct",), and a search
# followed by a read of one place it showed (the pattern the rule looks for, made frequent).
action = st.one_of(
    st.tuples(st.just("find"), st.lists(st.sampled_from(PLACES), max_size=3, unique=True), st.booleans()),
    st.tuples(st.just("cat"), st.sampled_from(PLACES), HOW),
    st.tuples(st.just("correct")),
    st.tuples(st.just("search"), st.sampled_from(PLACES), HOW),
)
Action = tuple[Any, ...]


def random_run(i: int, actions: list[Action], goal_place: str) -> Episode:
    rec = EpisodeRecorder(
        f"ep-{i}", goal=f"tune the cache {goal_place}".strip(), environment=ENV, started_at=100.0 * i
    )

    def shell(cmd: str, output: str, ok: bool) -> None:
        rec.tool_call("shell", json.dumps({"cmd": cmd}))
        rec.tool_result("shell", output, ok=ok)

    def cat(place: str, how: str) -> None:
        output = {"ok": "key: value", "missing": f"cat: {place}: No such file or directory"}.get(
            how, f"cat: {place}: Permission denied"
        )
        shell(f"cat {place}", output, how == "ok")

    for act in actions:
        if act[0] == "correct":
            rec.correction("not that one")
        elif act[0] == "find":
            output = "\n".join(f"./{p}" for p in act[1]) if act[2] else "error: find: '.': Permission denied"
            shell("find . -name '*.y*ml'", output, act[2])
        elif act[0] == "search":
            shell("find . -name '*.y*ml'", "\n".join(f"./{p}" for p in PLACES), True)
            cat(act[1], act[2])
        else:
            cat(act[1], act[2])
    return rec.finish("unknown", finished_at=100.0 * i + 10)


def uses(episode: Episode, place: str) -> tuple[bool, bool]:
    """Whether ``episode`` used ``place`` successfully (no correction right after), and whether a call
    found it missing: what the record of ``place`` must follow."""
    tried = attempts(episode)
    named = [a for a in tried if a.call.content == json.dumps({"cmd": f"cat {place}"})]
    worked = any(a.ok and not corrected_after(episode, a, tried) for a in named)
    missing = any(not a.ok and "No such file" in a.result.content for a in named)
    return worked, missing


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(action, max_size=6), st.sampled_from(("", "", *PLACES))),
        min_size=1,
        max_size=6,
    )
)
def test_navigation_records_rest_on_a_lookup_and_a_use_and_follow_the_latest_evidence(
    specs: list[tuple[list[Action], str]],
) -> None:
    episodes = [random_run(i + 1, actions, goal_place) for i, (actions, goal_place) in enumerate(specs)]
    store: dict[str, ExperienceRecord] = {}
    for episode in episodes:
        changed = learn(episode, list(store.values())).records
        assert len({r.id for r in changed}) == len(changed)
        store.update((r.id, r) for r in changed)
    by_id = {e.id: e for e in episodes}
    for nav in (r for r in store.values() if r.kind == "navigation"):
        assert nav.step in PLACES and nav.status in ("active", "disputed", "legacy")
        # Created by a lookup that showed the place before a use that worked; every other episode it
        # cites used it successfully.
        first = nav.evidence[0]
        events = {e.seq: e for e in by_id[first.episode_id].events}
        lookup_result, use_call = events[first.seqs[1]], events[first.seqs[2]]
        assert lookup_result.ok and f"./{nav.step}" in lookup_result.content.split("\n")
        assert use_call.content == json.dumps({"cmd": f"cat {nav.step}"})
        assert nav.step not in by_id[first.episode_id].goal
        for evidence in nav.evidence:
            assert uses(by_id[evidence.episode_id], nav.step)[0]
        # The latest run that called the place decides: gone and never working there -> not active;
        # working there -> not disputed.
        last = next((e for e in reversed(episodes) if any(uses(e, nav.step))), None)
        if last is not None and uses(last, nav.step) == (False, True):
            assert nav.status != "active"
        elif last is not None and uses(last, nav.step)[0]:
            assert nav.status != "disputed"
    # Learning the newest episode again (a worker retried after a crash) changes nothing; learning is
    # deterministic.
    assert learn(episodes[-1], list(store.values())).records == ()
    again: dict[str, ExperienceRecord] = {}
    for episode in episodes:
        again.update((r.id, r) for r in learn(episode, list(again.values())).records)
    assert again == store
