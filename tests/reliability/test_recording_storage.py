"""``aiden.testing.RecordingStorage``: the op record power-loss replay reads (``powerloss.py``).

Recording lives in the testing kit: production ``aiden.Storage`` keeps no record.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aiden
import aiden.testing
from aiden.errors import StorageError
from aiden.testing import RecordingStorage, StorageOp


def test_every_mutation_is_recorded_in_order_with_its_offset(tmp_path: Path) -> None:
    st = RecordingStorage()
    deep = tmp_path / "a" / "b"
    st.mkdir(deep)
    log = deep / "log"
    log.write_bytes(b"12345")  # before the open: an append lands after it
    fd = st.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    st.write(fd, b"ab")
    st.write(fd, b"")  # changes nothing, recorded as nothing
    st.truncate(fd, 3)
    st.write(fd, b"c")
    st.fsync(fd)
    st.close(fd)
    st.write_atomic(deep / "mark", b"m")
    temp = next(op.path for op in st.ops if op.kind == "create" and op.path != str(log))
    st.rename_noreplace(deep / "mark", deep / "moved")
    st.unlink(deep / "absent")  # already gone: nothing happened, nothing recorded
    st.unlink(deep / "moved")
    a, b = str(tmp_path / "a"), str(deep)
    assert st.ops == [
        StorageOp("mkdir", a),
        StorageOp("fsync_dir", str(tmp_path)),
        StorageOp("mkdir", b),
        StorageOp("fsync_dir", a),
        StorageOp("create", str(log)),
        StorageOp("write", str(log), b"ab", offset=5),
        StorageOp("truncate", str(log), offset=3),
        StorageOp("write", str(log), b"c", offset=3),
        StorageOp("fsync", str(log)),
        StorageOp("create", temp),
        StorageOp("write", temp, b"m"),
        StorageOp("fsync", temp),
        StorageOp("replace", temp, target=str(deep / "mark")),
        StorageOp("fsync_dir", b),
        StorageOp("rename", str(deep / "mark"), target=str(deep / "moved")),
        StorageOp("unlink", str(deep / "moved")),
    ]
    assert log.read_bytes() == b"123c"
    with pytest.raises(StorageError):
        st.unlink(deep / "absent", missing_ok=False)
    assert len(st.ops) == 16


def test_a_subclass_that_skips_directory_fsyncs_still_records_its_directories(tmp_path: Path) -> None:
    class NoDirFsync(RecordingStorage):
        def fsync_dir(self, path: str | os.PathLike[str]) -> None:
            return

    st = NoDirFsync()
    st.mkdir(tmp_path / "a" / "b")
    st.mkdir(tmp_path / "a" / "b")  # exists: nothing to create
    assert st.ops == [StorageOp("mkdir", str(tmp_path / "a")), StorageOp("mkdir", str(tmp_path / "a" / "b"))]


def test_storage_op_moved_from_aiden_to_the_testing_kit() -> None:
    assert "StorageOp" not in aiden.__all__
    assert not hasattr(aiden.Storage(), "ops")
    assert "StorageOp" in aiden.testing.__all__ and "RecordingStorage" in aiden.testing.__all__
