"""A throwaway PostgreSQL cluster of the test's own (initdb + pg_ctl under /tmp), to stop and start.

The machine's main server is never touched: the tests that kill a server kill this one.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import attrs


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.define
class Cluster:
    directory: Path
    bin_dir: Path
    port: int
    as_user: list[str]

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.directory / "data"), *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-o", options, "-l", str(self.directory / "server.log"), "-w", "start")

    def kill(self) -> None:
        """Stop abruptly: every server process quits at once, as in a crash (no shutdown checkpoint)."""
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        try:
            self.kill()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.directory, ignore_errors=True)


def make_cluster(password: str | None = None) -> Cluster | str:
    """A started cluster, or the reason none can be made here.

    With ``password``, the ``postgres`` role has it and every connection must give it
    (scram-sha-256); without, any local connection is trusted.
    """
    bin_dir = _bin_dir()
    if bin_dir is None:
        return "no PostgreSQL server binaries (initdb) on this machine"
    as_user: list[str] = []
    directory = Path(tempfile.mkdtemp(prefix="entropic-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        # The server refuses to run as root: the cluster belongs to the postgres account.
        runuser = shutil.which("runuser")
        if runuser is None:
            return "running as root without runuser, so no server can be started as another user"
        as_user = [runuser, "-u", "postgres", "--"]
        shutil.chown(directory, "postgres", "postgres")
    directory.chmod(0o700)
    auth = ["-A", "trust"]
    if password is not None:
        secret = directory / "pwfile"
        secret.write_text(password + "\n", encoding="utf-8")
        if as_user:
            shutil.chown(secret, "postgres", "postgres")
        auth = ["-A", "scram-sha-256", f"--pwfile={secret}"]
    result = subprocess.run(
        [
            *as_user,
            str(bin_dir / "initdb"),
            "-D",
            str(directory / "data"),
            *auth,
            "-U",
            "postgres",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        return f"initdb failed: {result.stderr.strip()[-300:]}"
    cluster = Cluster(directory=directory, bin_dir=bin_dir, port=_free_port(), as_user=as_user)
    cluster.start()
    return cluster
