"""aiden.sync under races: concurrent closes, calls as the loop thread stops, use on the loop thread,
an interrupted open, fork."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal

import aiden
import aiden.sync
from aiden import ClosedError, Config, SessionEvent
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.session import FileSessionStore

CFG = Config(durability="none")
ON_LOOP = (
    "a SyncMemory cannot be used on its own loop thread (e.g. from a summarizer or a call() function): "
    "use the async Memory there"
)


def event(content: str) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", content=content)


def loop_threads() -> int:
    return sum(t.name == "aiden-memory-loop" for t in threading.enumerate())


class GatedCloseStore(FileSessionStore):
    """Its close says it started, then waits for the gate."""

    started = threading.Event()
    gate = threading.Event()

    def close(self) -> None:
        self.started.set()
        self.gate.wait()
        super().close()


def test_a_close_while_another_thread_closes_waits_for_that_close(tmp_path: Path) -> None:
    order: list[str] = []

    def close(memory: aiden.sync.SyncMemory, name: str) -> None:
        memory.close()
        order.append(name)

    with aiden.sync.open_memory(tmp_path, config=CFG, store=GatedCloseStore) as memory:
        memory.append(event("kept"))
        first = threading.Thread(target=close, args=(memory, "first close returned"))
        first.start()
        assert GatedCloseStore.started.wait(30)
        second = threading.Thread(target=close, args=(memory, "second close returned"))
        second.start()
        second.join(0.2)  # gives a second close that does not wait the time to return
        closed_while_closing = memory.closed
        order.append("store close released")
        GatedCloseStore.gate.set()
        first.join(30)
        second.join(30)
        assert memory.closed
    assert not closed_while_closing  # closed only once the close is done
    assert order[0] == "store close released"
    assert sorted(order[1:]) == ["first close returned", "second close returned"]
    assert loop_threads() == 0


def test_a_call_that_passed_the_closed_check_as_the_loop_thread_stops_gets_closed_error(tmp_path: Path) -> None:
    paused, release = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def pause_in_portal_call(frame: FrameType, what: str, arg: Any) -> None:
        # The caller's thread stops as it enters the portal: past the facade's closed check.
        if what == "call" and frame.f_code is BlockingPortal.call.__code__ and not paused.is_set():
            paused.set()
            release.wait(30)

    def caller(memory: aiden.sync.SyncMemory) -> None:
        sys.settrace(pause_in_portal_call)
        try:
            memory.stats()
        except BaseException as exc:  # whatever it is, the test reports it
            outcome.append(exc)
        finally:
            sys.settrace(None)

    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        thread = threading.Thread(target=caller, args=(memory,))
        thread.start()
        assert paused.wait(30)
    assert loop_threads() == 0
    release.set()
    thread.join(30)
    assert [(type(e), str(e)) for e in outcome] == [(ClosedError, "memory is closed")]


def test_a_facade_call_on_the_loop_thread_raises_loop_thread_error(tmp_path: Path) -> None:
    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        async def stats_on_the_loop(m: aiden.Memory) -> object:
            return memory.stats()

        with pytest.raises(aiden.AidenError) as info:
            memory.call(stats_on_the_loop)
        assert (type(info.value), str(info.value)) == (aiden.AidenError, ON_LOOP)
        assert memory.append(event("still usable")).seq == 1


def test_close_on_the_loop_thread_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    seen: list[object] = []

    def block() -> None:
        with aiden.sync.open_memory(tmp_path, config=CFG) as memory:

            async def close_on_the_loop(m: aiden.Memory) -> None:
                memory.close()

            try:
                memory.call(close_on_the_loop)
            except aiden.AidenError as exc:
                seen.append((type(exc), str(exc)))
            seen.append(memory.closed)
            seen.append(memory.append(event("after")).seq)
        seen.append(memory.closed)

    thread = threading.Thread(target=block, daemon=True)  # hangs on a facade that closes under itself
    thread.start()
    thread.join(60)
    assert seen == [(aiden.AidenError, ON_LOOP), False, 1, True]
    assert loop_threads() == 0


def test_an_interrupt_while_opening_reaches_the_caller_and_stops_the_loop_thread(tmp_path: Path) -> None:
    interrupted = threading.Event()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    def store_interrupting_the_opener(layout: Layout, storage: Storage, config: Config) -> FileSessionStore:
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)
        assert interrupted.wait(30)  # the opener is interrupted while the open is under way
        return FileSessionStore(layout, storage, config)

    assert threading.current_thread() is threading.main_thread()  # signals are handled there
    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt), aiden.sync.open_memory(
            tmp_path, config=CFG, store=store_interrupting_the_opener
        ):
            pytest.fail("the block ran")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert loop_threads() == 0
    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:  # the open left nothing locked
        assert memory.append(event("reopened")).seq == 1


def in_child(run: Any) -> str:
    """``run()``'s text (or its exception's) from a forked child, killed by SIGALRM if it hangs."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(30)
        try:
            text = str(run())
        except BaseException as exc:  # reported to the parent
            text = f"{type(exc).__name__}: {exc}"
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as out:
        text = out.read().decode()
    return text if status == 0 else f"child ended with status {status}"


def test_a_forked_child_cannot_use_its_parents_memory_and_opens_its_own(tmp_path: Path) -> None:
    def child() -> list[object]:
        try:
            memory.append(event("from the child"))
        except ClosedError as exc:
            refused = str(exc)
        memory.close()  # the parent's: nothing to do here
        with aiden.sync.open_memory(tmp_path / "child-sync", config=CFG) as own:
            sync_seq = own.append(event("child")).seq

        async def async_open() -> int:
            async with aiden.open_memory(tmp_path / "child-async", config=CFG) as again:
                return (await again.append(event("child"))).seq

        return [refused, memory.closed, sync_seq, anyio.run(async_open)]

    with aiden.sync.open_memory(tmp_path / "parent", config=CFG) as memory:
        memory.append(event("before the fork"))
        assert in_child(child) == str([
            "memory is closed in this process: it was opened before os.fork(); open it again here", True, 1, 1
        ])
        assert memory.append(event("after the fork")).seq == 2
