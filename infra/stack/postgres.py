"""Postgres from Debian's packages, in a data folder of the stack's own (its own initdb).

Postgres refuses to run as root, so when the stack runs as root the cluster belongs to the
`postgres` system user that Debian's package creates.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

from core.settings import Settings
from core.store.connection import admin_connection, ensure_reader
from infra.stack.process import StackError
from infra.stack.service import Service

_APT_HINT = "install Postgres (apt-get install postgresql) or set LK_POSTGRES_BIN_DIR"


def postgres_bin_dir(settings: Settings) -> Path:
    if settings.postgres_bin_dir:
        return settings.postgres_bin_dir
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if debian:
        return debian[-1].parent
    if found := shutil.which("postgres"):
        return Path(found).resolve().parent
    raise StackError(f"postgres: no server binaries found: {_APT_HINT}")


class Postgres(Service):
    name = "postgres"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.cluster_dir = self.data_dir / "data"
        self.run_as = "postgres" if os.geteuid() == 0 else None

    @property
    def port(self) -> int:
        return self.settings.postgres_port

    def _owner(self) -> tuple[int, int] | None:
        if self.run_as is None:
            return None
        try:
            entry = pwd.getpwnam(self.run_as)
        except KeyError as exc:
            raise StackError(
                f"postgres: running as root needs the '{self.run_as}' user: {_APT_HINT}"
            ) from exc
        return entry.pw_uid, entry.pw_gid

    def prepare(self) -> None:
        bin_dir = postgres_bin_dir(self.settings)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        owner = self._owner()
        if owner:
            os.chown(self.data_dir, *owner)
        if (self.cluster_dir / "PG_VERSION").exists():
            return
        pwfile = self.data_dir / "pwfile"
        pwfile.write_text(self.settings.postgres_password + "\n")
        if owner:
            os.chown(pwfile, *owner)
        result = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(self.cluster_dir),
                "-U",
                self.settings.postgres_user,
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=peer",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
            capture_output=True,
            text=True,
            check=False,
            user=self.run_as,
        )
        pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["?"])[-1]
            if self.run_as and "Permission denied" in last:
                last += f" (the '{self.run_as}' user must be able to reach {self.data_dir})"
            raise StackError(f"postgres: initdb failed: {last}")

    def launch(self) -> None:
        bin_dir = postgres_bin_dir(self.settings)
        self.process.start(
            [
                str(bin_dir / "postgres"),
                "-D",
                str(self.cluster_dir),
                "-p",
                str(self.port),
                "-c",
                f"listen_addresses={self.settings.host}",
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=60",
                "-c",
                "shared_buffers=128MB",
                "-c",
                "fsync=on",
                # Change data capture (core/cdc): logical decoding, a slot for the connector,
                # and a bound on the WAL a slot may hold while its connector is away.
                "-c",
                "wal_level=logical",
                "-c",
                "max_replication_slots=10",
                "-c",
                "max_wal_senders=10",
                "-c",
                f"max_slot_wal_keep_size={self.settings.postgres_max_slot_wal_keep_size}",
            ],
            user=self.run_as,
        )

    def stop(self) -> bool:
        # SIGINT is Postgres's "fast" shutdown: roll back open transactions, then stop cleanly.
        return self.process.stop(stop_signal=signal.SIGINT, whole_group=False)

    def _connect(self, dbname: str):  # type: ignore[no-untyped-def]
        return admin_connection(self.settings, dbname, connect_timeout=3)

    def ready(self) -> bool:
        with self._connect("postgres") as conn:
            return conn.execute("select 1").fetchone() == (1,)

    def provision(self) -> None:
        with self._connect("postgres") as conn:
            exists = conn.execute(
                "select 1 from pg_database where datname = %s", (self.settings.postgres_db,)
            ).fetchone()
            if not exists:
                from psycopg import sql

                conn.execute(
                    sql.SQL("create database {}").format(sql.Identifier(self.settings.postgres_db))
                )
        # The serving layer's read-only login, with the store's tables it may read.
        ensure_reader(self.settings)
