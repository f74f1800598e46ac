"""The store's SQLite file: one connection per thread, the transaction helper, the schema.

`StoreFile` is what every part of the embedded backend holds; nothing in it knows items from
ACLs beyond the schema and the embedding model the file records.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from suli.backends.embedded import sql as q
from suli.backends.embedded import typos
from suli.errors import BackendUnavailable, DeadlineExceeded, ModelMismatch
from suli.files import create_private

PROGRESS_STEPS = 2_000  # SQLite VM steps between deadline checks
BUSY_TIMEOUT_S = 30.0  # a writer in another process holds the lock: wait, then fail clearly
MMAP_BYTES = 1 << 30
CACHE_KIB = 32 << 10


class StoreFile:
    """Items, vectors, ACLs, principals and token hashes in one SQLite file (WAL mode)."""

    def __init__(
        self, path: str | Path, dimension: int, *, model: str = "", check_model: bool = True
    ) -> None:
        """model: the embedder's; the store records it and refuses another (unless
        check_model is off: `suli reindex` re-embeds, then record_model)."""
        self.path = Path(path)
        self.dimension = dimension
        self.model = model
        self.check_model = check_model
        self.stored_model = model  # the model the store's vectors come from, once read
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The store holds every workspace's items and the token hashes: a new file is the
        # owner's only (SQLite gives its -wal and -shm files the same mode). An existing
        # file keeps the mode its operator chose.
        create_private(self.path)
        self._init_schema()

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections are not shared between threads)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise BackendUnavailable(f"the embedded store {self.path} is closed")
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never corrupt
            # Reads through mmap skip a system call per page: measured 1.5x on the text leg at
            # 100k items; the page cache is per connection, mmap pages are shared.
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            conn.create_function("suli_regex", 3, q.regex_sql, deterministic=True)
            for ddl in typos.vocab_schema():
                conn.execute(ddl)
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'items'").fetchone():
                for ddl in typos.log_triggers():  # else _init_schema adds them
                    conn.execute(ddl)
        except sqlite3.Error as e:
            raise BackendUnavailable(f"cannot open the embedded store {self.path}: {e}") from e
        self._local.conn = conn
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    @contextlib.contextmanager
    def tx(
        self, write: bool = False, timeout_s: float | None = None
    ) -> Iterator[sqlite3.Connection]:
        """One transaction (reads see one snapshot), a deadline, and errors mapped once."""
        conn = self.conn()
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                if timeout_s:
                    end = time.monotonic() + timeout_s
                    conn.set_progress_handler(lambda: int(time.monotonic() > end), PROGRESS_STEPS)
                try:
                    yield conn
                    if write:  # the words table, in the same transaction as the write
                        typos.sync_terms(conn)
                finally:
                    if timeout_s:
                        conn.set_progress_handler(None, 0)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.OperationalError as e:
            if "interrupted" in str(e):
                raise DeadlineExceeded("the embedded store did not answer in time") from e
            raise BackendUnavailable(f"embedded store {self.path}: {e}") from e
        except sqlite3.DatabaseError as e:
            raise BackendUnavailable(f"embedded store {self.path}: {e}") from e

    def _init_schema(self) -> None:
        with self.tx(write=True) as c:
            c.execute(q.schema(self.dimension)[0])  # meta
            meta = dict(c.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("schema") == "2":  # before per-workspace ids: re-key in place
                q.migrate_2_to_3(c)
                meta["schema"] = str(q.SCHEMA_VERSION)
            for ddl in q.schema(self.dimension):
                c.execute(ddl)
            # A migration drops and renames `items`, and with it this connection's log triggers.
            for ddl in typos.log_triggers():
                c.execute(ddl)
            if not meta:
                c.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("schema", str(q.SCHEMA_VERSION)), ("dimension", str(self.dimension)),
                     ("model", self.model), ("generation", "0"), ("terms_generation", "0")],
                )  # fmt: skip
                return
            if meta.get("schema") == str(q.SCHEMA_VERSION):
                typos.rebuild_terms(c)  # a file written without the words table, or behind it
        if meta.get("schema") != str(q.SCHEMA_VERSION):
            raise BackendUnavailable(
                f"{self.path} has store format {meta.get('schema')}, this Suli reads format "
                f"{q.SCHEMA_VERSION}; re-index into a new file (SULI_EMBEDDED_PATH)"
            )
        if int(meta["dimension"]) != self.dimension:
            raise BackendUnavailable(
                f"{self.path} holds {meta['dimension']}-dimension vectors but the embedder makes "
                f"{self.dimension}; use another SULI_EMBEDDED_PATH or re-index into a new file"
            )
        self.stored_model = meta.get("model") or ""
        if self.model and not self.stored_model:
            # A store written before the model was recorded: its vectors are taken to be this
            # model's (docs/decisions.md, "The store records its model"); recorded from now on.
            self.record_model()
        elif self.check_model and self.model and self.stored_model != self.model:
            raise ModelMismatch(str(self.path), self.stored_model, self.model)

    def record_model(self) -> None:
        """Record `model` as the one the store's vectors come from (`suli reindex`, after it
        has re-embedded every item)."""
        with self.tx(write=True) as c:
            c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('model', ?)", (self.model,))
        self.stored_model = self.model

    def close(self) -> None:
        """Close every thread's connection; a later transaction fails as BackendUnavailable."""
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()
