"""A throwaway PostgreSQL server for tests: ``$AIDEN_TEST_PG_DSN``, or a cluster started in a temp dir.

:func:`server_for_tests` returns a :class:`PgServer` with a libpq DSN: the server
named by ``AIDEN_TEST_PG_DSN`` when that variable is set (left running),
else a new cluster: ``initdb`` into a temp dir, ``pg_ctl -w start``
listening on 127.0.0.1 on a free port with its unix socket in the temp dir,
trust authentication for a superuser ``aiden``, and :meth:`PgServer.stop`
stops it and deletes the directory. Binaries come from ``pg_config
--bindir`` or ``/usr/lib/postgresql/<version>/bin``; :meth:`PgServer.restart`
restarts one started here. initdb refuses to run
as root, so under root the server runs as the ``postgres`` system user (or
``nobody``) through ``runuser``. The cluster trades durability for speed
(``fsync=off``): it holds test data only.

:class:`PgUnavailable` says why no server could be had. No pytest here.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from aiden.errors import AidenError

__all__ = ["TEST_DSN_ENV", "PgServer", "PgUnavailable", "find_bindir", "start_cluster", "server_for_tests"]

TEST_DSN_ENV = "AIDEN_TEST_PG_DSN"
"""The variable naming an existing server for the tests (a libpq DSN)."""


class PgUnavailable(AidenError):
    """No PostgreSQL server could be found or started; the message says why."""


class PgServer:
    """A PostgreSQL server for tests: its DSN; :meth:`stop` ends it when this process started it."""

    def __init__(
        self, dsn: str, *, bindir: Path | None = None, base: Path | None = None, run_as: str | None = None
    ):
        self.dsn = dsn
        self.bindir = bindir
        self.base = base
        self.run_as = run_as

    @property
    def owned(self) -> bool:
        """True when this process started the server (and :meth:`stop` stops it)."""
        return self.base is not None

    def restart(self, mode: str = "fast") -> None:
        """Restart the server this process started (``pg_ctl restart -m <mode>``, same options): connections drop."""
        if self.base is None or self.bindir is None:
            raise PgUnavailable("this server was not started here: it cannot be restarted")
        _run(
            self.run_as,
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.base / "data"),
                "-l",
                str(self.base / "server.log"),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
                "restart",
            ],
            timeout=90,
        )

    def stop(self) -> None:
        """Stop the server this process started (immediately: test data only) and delete its directory."""
        if self.base is None or self.bindir is None:
            return
        base, self.base = self.base, None
        try:
            _run(
                self.run_as,
                [str(self.bindir / "pg_ctl"), "-D", str(base / "data"), "-m", "immediate", "-w", "stop"],
            )
        finally:
            shutil.rmtree(base, ignore_errors=True)


def find_bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl`` (None when PostgreSQL is not installed)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name), reverse=True
    )
    candidates.extend(versions)
    return next((d for d in candidates if (d / "initdb").is_file() and (d / "pg_ctl").is_file()), None)


def _version(name: str) -> int:
    return int(name) if name.isdigit() else -1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _server_user() -> str | None:
    """The user to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PgUnavailable("running as root and neither a 'postgres' nor a 'nobody' user exists for the server")


def _run(user: str | None, argv: list[str], timeout: float = 60) -> None:
    if user is not None:
        runuser = shutil.which("runuser")
        if runuser is None:
            raise PgUnavailable(
                "running as root and runuser is missing (needed to start the server as another user)"
            )
        argv = [runuser, "-u", user, "--", *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PgUnavailable(f"{Path(argv[0]).name} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-800:]
        raise PgUnavailable(f"{' '.join(Path(a).name for a in argv[:4])} exited {done.returncode}: {tail}")


def start_cluster(*, attempts: int = 3) -> PgServer:
    """initdb and start a new cluster (see the module docstring); :class:`PgUnavailable` with the reason."""
    bindir = find_bindir()
    if bindir is None:
        raise PgUnavailable("PostgreSQL binaries not found (no pg_config, no /usr/lib/postgresql/*/bin)")
    user = _server_user()
    base = Path(tempfile.mkdtemp(prefix="aiden-pg-"))
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(base, entry.pw_uid, entry.pw_gid)
        data = base / "data"
        _run(
            user,
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "aiden",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        )
        last: PgUnavailable | None = None
        for _ in range(attempts):  # another process may take the free port before the server binds it
            port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off -c full_page_writes=off"
            )
            try:
                _run(
                    user,
                    [
                        str(bindir / "pg_ctl"),
                        "-D",
                        str(data),
                        "-l",
                        str(base / "server.log"),
                        "-o",
                        options,
                        "-w",
                        "-t",
                        "60",
                        "start",
                    ],
                    timeout=90,
                )
            except PgUnavailable as exc:
                last = exc
                time.sleep(0.2)
                continue
            return PgServer(
                f"host=127.0.0.1 port={port} user=aiden dbname=postgres",
                bindir=bindir,
                base=base,
                run_as=user,
            )
        raise last or PgUnavailable("pg_ctl start failed")
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


def server_for_tests() -> PgServer:
    """The server for tests: ``$AIDEN_TEST_PG_DSN`` when set, else :func:`start_cluster`."""
    dsn = os.environ.get(TEST_DSN_ENV)
    if dsn:
        return PgServer(dsn)
    return start_cluster()
