"""The public API is explicit and complete; importing aiden stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiden
import aiden.errors

ROOT = Path(__file__).resolve().parents[1]


def test_all_names_resolve_and_are_sorted() -> None:
    assert list(aiden.__all__) == sorted(aiden.__all__)
    for name in aiden.__all__:
        assert getattr(aiden, name) is not None, name


def test_every_error_class_is_exported() -> None:
    errors = {n for n in aiden.errors.__all__}
    assert errors <= set(aiden.__all__)
    for name in errors:
        assert issubclass(getattr(aiden, name), aiden.AidenError)


def test_public_objects_have_docstrings() -> None:
    for name in aiden.__all__:
        obj = getattr(aiden, name)
        if callable(obj) and not isinstance(obj, type(aiden.EventType)):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_import_aiden_does_not_import_litellm_or_touch_the_network() -> None:
    code = (
        "import sys, socket\n"
        "def hook(event, args):\n"
        "    if event.startswith('socket.') and event != 'socket.__new__':\n"
        "        raise SystemExit('network attempt: ' + event)\n"
        "sys.addaudithook(hook)\n"
        "import aiden, aiden.testing, aiden.summarizers\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr + out.stdout
    assert out.stdout.strip() == "ok"


def test_import_aiden_loads_only_the_types_a_first_line_needs() -> None:
    # Import time is the user's first impression (a CLI, a serverless worker): `import aiden`
    # loads the errors, events and config; the runtime, actors and stores load at first use.
    code = (
        "import sys, aiden\n"
        "print(sorted(m for m in sys.modules if m.startswith('aiden')))\n"
        "aiden.open_memory\n"
        "print('aiden.runtime' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    eager, runtime_after_use = out.stdout.splitlines()
    assert eager == "['aiden', 'aiden._lazy', 'aiden.config', 'aiden.errors', 'aiden.events']"
    assert runtime_after_use == "True"
