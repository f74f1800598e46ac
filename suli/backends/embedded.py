"""Embedded backend: one SQLite file, FTS5 BM25 for words, exact numpy search for meaning."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import re2

from suli.backends import embedded_sql as q
from suli.backends.base import BulkOutcome, Facets, Hit, LegQuery, LegResults
from suli.errors import BackendUnavailable, DeadlineExceeded, InvalidInput, NotFound
from suli.models import BoardAcl, Filters, Item, Principal
from suli.visibility import Visibility

FACET_SIZE = 100  # as the terms aggregations of the OpenSearch backend
PROGRESS_STEPS = 2_000  # SQLite VM steps between deadline checks
BUSY_TIMEOUT_S = 30.0  # a writer in another process holds the lock: wait, then fail clearly
REGEX_MAX_MEM = 8 << 20  # RE2's budget for one compiled pattern; larger ones are refused
# Below this share of the stored rows the candidates' vectors are gathered and scored;
# above it scoring every row (one matrix-vector product) and masking is cheaper.
GATHER_SHARE = 0.25
CANDIDATE_SETS = 16  # per generation: a principal's repeated searches skip the SQL scan


def _re2_options() -> re2.Options:
    opts = re2.Options()
    opts.case_sensitive = False
    opts.dot_nl = True  # like Lucene's regexp on the whole field: `.` crosses lines
    opts.log_errors = False
    opts.max_mem = REGEX_MAX_MEM
    return opts


@lru_cache(maxsize=64)
def compile_regex(pattern: str) -> Any:
    """A linear-time RE2 pattern: case-insensitive, found anywhere, `^`/`$` anchor the field."""
    try:
        return re2.compile(pattern, _re2_options())
    except re2.error as e:
        detail = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidInput(f"regex: invalid or too complex pattern ({detail})", "regex") from None


def _regex_sql(pattern: str, title: str | None, body: str | None) -> int:
    rx = compile_regex(pattern)
    return int(bool(rx.search(title or "")) or bool(rx.search(body or "")))


@dataclass
class _Matrix:
    """All stored vectors, rows in rowid order; valid for one store generation."""

    generation: int
    rowids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    # (WHERE, params) -> rowids that SQL found for it; a write starts a new generation.
    candidates: OrderedDict[tuple[Any, ...], npt.NDArray[np.int64]] = field(
        default_factory=OrderedDict
    )


class EmbeddedBackend:
    """Items, vectors, ACLs, principals and token hashes in one SQLite file (WAL mode)."""

    def __init__(self, path: str | Path, dimension: int, *, model: str = "") -> None:
        self.path = Path(path)
        self.dimension = dimension
        self.model = model
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._matrix: _Matrix | None = None
        self._matrix_lock = threading.Lock()
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._init_schema()

    # ---- connections -------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
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
            conn.create_function("suli_regex", 3, _regex_sql, deterministic=True)
        except sqlite3.Error as e:
            raise BackendUnavailable(f"cannot open the embedded store {self.path}: {e}") from e
        self._local.conn = conn
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    @contextlib.contextmanager
    def _tx(
        self, write: bool = False, timeout_s: float | None = None
    ) -> Iterator[sqlite3.Connection]:
        """One transaction (reads see one snapshot), a deadline, and errors mapped once."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                if timeout_s:
                    end = time.monotonic() + timeout_s
                    conn.set_progress_handler(lambda: int(time.monotonic() > end), PROGRESS_STEPS)
                try:
                    yield conn
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
        with self._tx(write=True) as c:
            for ddl in q.schema(self.dimension):
                c.execute(ddl)
            meta = dict(c.execute("SELECT key, value FROM meta").fetchall())
            if not meta:
                c.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("schema", str(q.SCHEMA_VERSION)), ("dimension", str(self.dimension)),
                     ("model", self.model), ("generation", "0")],
                )  # fmt: skip
                return
        if int(meta["dimension"]) != self.dimension:
            raise BackendUnavailable(
                f"{self.path} holds {meta['dimension']}-dimension vectors but the embedder makes "
                f"{self.dimension}; use another SULI_EMBEDDED_PATH or re-index into a new file"
            )
        if self.model and meta.get("model") and meta["model"] != self.model:
            raise BackendUnavailable(
                f"{self.path} was indexed with model {meta['model']!r}, not {self.model!r}; "
                "re-index into a new file"
            )

    @staticmethod
    def _bump(c: sqlite3.Connection) -> None:
        """Every write moves the generation on, so each process drops its stale vector matrix."""
        c.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")

    def refresh(self) -> None:
        """API parity with OpenSearch: a committed write is already searchable."""

    # ---- search ------------------------------------------------------------------------

    def search(self, query: LegQuery) -> LegResults:
        if query.regex:
            compile_regex(query.regex)  # a bad pattern is the caller's error, not a failed leg
        text: tuple[Hit, ...] = ()
        vector: tuple[Hit, ...] = ()
        errors: dict[str, str] = {}
        timings: dict[str, float] = {}
        with self._tx(timeout_s=query.timeout_s) as c:
            if query.text is not None:
                t0 = time.perf_counter()
                text = self._text_leg(c, query, query.text)
                timings["text_took"] = round((time.perf_counter() - t0) * 1000, 3)
            if query.vector is not None:
                t0 = time.perf_counter()
                try:
                    vector = self._vector_leg(c, query, query.vector, timings)
                except ValueError as e:  # a malformed query vector fails this leg only
                    errors["vector"] = f"invalid query vector: {e}"
                timings["vector_took"] = round((time.perf_counter() - t0) * 1000, 3)
        return LegResults(text, vector, errors, timings)

    def _text_leg(self, c: sqlite3.Connection, query: LegQuery, text: str) -> tuple[Hit, ...]:
        expr = q.match_expression(text, query.text_fields)
        if expr is None:
            return ()  # only common words under the stemmed rule: nothing to match
        table = q.FTS_TABLES[query.text_fields]
        where, params = q.where(query.vis, query.filters, query.regex)
        # bm25() in ORDER BY runs SQLite's sorter, measured 2x faster than FTS5's own
        # `ORDER BY rank`; snippets are made afterwards for the returned rows only.
        ranked = c.execute(
            f"""SELECT f.rowid, {q.bm25_call(table)} AS s
                FROM {table} f JOIN items i ON i.rowid = f.rowid
                WHERE {table} MATCH ? AND {where} ORDER BY s, f.rowid LIMIT ?""",
            [expr, *params, query.depth],
        ).fetchall()
        if not ranked:
            return ()
        rowids = [r[0] for r in ranked]
        marks = ", ".join("?" * len(rowids))
        snippets = {
            row[0]: row[1:]
            for row in c.execute(
                f"SELECT f.rowid, {q.snippet_columns(table)} FROM {table} f "
                f"WHERE {table} MATCH ? AND f.rowid IN ({marks})",
                [expr, *rowids],
            )
        }
        items = self._items_by_rowid(c, rowids)
        hits = []
        for rowid, score in ranked:
            item = items[rowid]
            raw = (item.body, item.caption, item.title)
            if any(q.MARK_OPEN in s or q.MARK_CLOSE in s for s in raw):
                frags: tuple[str, ...] = ()  # the text itself holds a marker: no safe highlight
            else:
                frags = tuple(h for h in map(q.highlight_html, snippets.get(rowid, ())) if h)
            hits.append(Hit(item, -float(score), frags))  # bm25() is negated: lower is better
        return tuple(hits)

    def _load_matrix(self, c: sqlite3.Connection) -> _Matrix:
        """The vector matrix of the snapshot `c` reads, reloaded when another write happened."""
        gen = int(c.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
        with self._matrix_lock:
            m = self._matrix
            if m is None or m.generation != gen:
                rows = c.execute("SELECT rowid, vector FROM vectors ORDER BY rowid").fetchall()
                rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                flat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
                m = _Matrix(gen, rowids, flat.reshape(len(rows), self.dimension))
                self._matrix = m
            return m

    def _vector_leg(
        self,
        c: sqlite3.Connection,
        query: LegQuery,
        vec: Sequence[float],
        timings: dict[str, float],
    ) -> tuple[Hit, ...]:
        qv = np.asarray(vec, dtype=np.float32)
        if qv.shape != (self.dimension,) or not np.all(np.isfinite(qv)):
            raise ValueError(f"expected {self.dimension} finite numbers")
        t0 = time.perf_counter()
        m = self._load_matrix(c)
        timings["vector_matrix"] = round((time.perf_counter() - t0) * 1000, 3)
        # Visibility and filters pick the candidate rows in SQL first: exact filtered k-NN.
        where, params = q.where(query.vis, query.filters, query.regex)
        cand = self._candidates(c, m, where, params)
        if not len(cand) or not len(m.rowids):
            return ()
        pos = np.searchsorted(m.rowids, cand)
        if len(cand) < GATHER_SHARE * len(m.rowids):
            scores = m.vectors[pos] @ qv
        else:
            scores = (m.vectors @ qv)[pos]
        k = min(query.depth, len(cand))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(cand) else np.arange(len(cand))
        top = top[np.lexsort((cand[top], -scores[top]))]  # best first; ties by insertion order
        items = self._items_by_rowid(c, [int(r) for r in cand[top]])
        return tuple(
            Hit(items[int(r)], float(s)) for r, s in zip(cand[top], scores[top], strict=True)
        )

    def _candidates(
        self, c: sqlite3.Connection, m: _Matrix, where: str, params: list[Any]
    ) -> npt.NDArray[np.int64]:
        """Rowids passing WHERE, from SQL; kept for the matrix's generation (same snapshot)."""
        key = (where, *params)
        with self._matrix_lock:
            got = m.candidates.get(key)
            if got is not None:
                m.candidates.move_to_end(key)
                return got
        # One string from SQLite's group_concat parses ~5x faster than fetching a row per item.
        joined = c.execute(
            f"SELECT group_concat(i.rowid) FROM items i WHERE {where}", params
        ).fetchone()[0]
        cand = np.fromstring(joined, dtype=np.int64, sep=",") if joined else np.empty(0, np.int64)
        with self._matrix_lock:
            m.candidates[key] = cand
            while len(m.candidates) > CANDIDATE_SETS:
                m.candidates.popitem(last=False)
        return cand

    @staticmethod
    def _items_by_rowid(c: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, Item]:
        out: dict[int, Item] = {}
        for chunk in range(0, len(rowids), 500):
            part = rowids[chunk : chunk + 500]
            marks = ", ".join("?" * len(part))
            for row in c.execute(
                f"SELECT {q.SELECT_ITEM} FROM items i WHERE i.rowid IN ({marks})", part
            ):
                out[row[0]] = q.row_item(row)
        return out

    # ---- reads -------------------------------------------------------------------------

    def browse(
        self,
        vis: Visibility,
        filters: Filters,
        limit: int,
        timeout_s: float | None = None,
        regex: str | None = None,
    ) -> tuple[list[Item], int]:
        if regex:
            compile_regex(regex)
        where, params = q.where(vis, filters, regex)
        with self._tx(timeout_s=timeout_s) as c:
            rows = c.execute(
                f"""SELECT {q.SELECT_ITEM} FROM items i WHERE {where}
                    ORDER BY i.last_ts DESC, i.id LIMIT ?""",
                [*params, limit],
            ).fetchall()
            total = c.execute(f"SELECT count(*) FROM items i WHERE {where}", params).fetchone()[0]
        return [q.row_item(r) for r in rows], int(total)

    def _by_ids(self, vis: Visibility, ids: Sequence[str], columns: str) -> list[tuple[Any, ...]]:
        """Rows of the visible items among ids; hidden ones included (a direct lookup names them)."""
        where, params = q.where(vis, Filters(), hidden_ok=True)
        unique = list(dict.fromkeys(ids))
        out: list[tuple[Any, ...]] = []
        with self._tx() as c:
            for chunk in range(0, len(unique), 500):
                part = unique[chunk : chunk + 500]
                marks = ", ".join("?" * len(part))
                out += c.execute(
                    f"SELECT {columns} FROM items i WHERE {where} AND i.id IN ({marks})",
                    [*params, *part],
                ).fetchall()
        return out

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        if not ids:
            return {}
        items = (q.row_item(r) for r in self._by_ids(vis, ids, q.SELECT_ITEM))
        return {it.id: it for it in items}

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        rows = self._by_ids(
            vis, ids, "i.id, (SELECT vector FROM vectors v WHERE v.rowid = i.rowid)"
        )
        return {r[0]: np.frombuffer(r[1], dtype=np.float32).tolist() for r in rows}

    def facets(self, vis: Visibility, filters: Filters) -> Facets:
        where, params = q.where(vis, filters)
        counts: dict[str, Counter[str]] = {name: Counter() for name in q.FACET_NAMES}
        with self._tx() as c:
            # One pass over the visible rows for the one-valued fields: the distinct
            # combinations are few, and the covering index holds every column read.
            combos = c.execute(
                f"SELECT i.kind, i.outcome, i.board, i.agent, count(*) FROM items i WHERE {where} "
                "GROUP BY i.kind, i.outcome, i.board, i.agent",
                params,
            ).fetchall()
            for *values, n in combos:
                for name, v in zip(("kind", "outcome", "board", "agent"), values, strict=True):
                    if v is not None:
                        counts[name][v] += n
            total = sum(n for *_, n in combos)
            # Many-valued fields: an item counts once per value, however often it repeats it.
            for name, sql in (
                ("station", "SELECT s.name, count(DISTINCT s.item) FROM item_stations s "
                            "JOIN items i ON i.rowid = s.item"),
                ("tag", "SELECT t.tag, count(DISTINCT t.item) FROM item_tags t "
                        "JOIN items i ON i.rowid = t.item"),
            ):  # fmt: skip
                counts[name].update(
                    dict(c.execute(f"{sql} WHERE {where} GROUP BY 1", params).fetchall())
                )
        values = {
            name: sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:FACET_SIZE]
            for name, counter in counts.items()
        }
        return Facets(total=total, values=values)

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        where, params = q.where(vis, Filters())
        with self._tx() as c:
            rows = c.execute(
                f"""SELECT {q.SELECT_ITEM} FROM items i WHERE {where}
                    AND i.rowid IN (SELECT item FROM item_refs WHERE ref = ?)
                    ORDER BY i.last_ts DESC, i.id LIMIT ?""",
                [*params, item_id, limit],
            ).fetchall()
        return [q.row_item(r) for r in rows]

    def count(self) -> int:
        with self._tx() as c:
            return int(c.execute("SELECT count(*) FROM items").fetchone()[0])

    # ---- writes ------------------------------------------------------------------------

    def upsert(self, items: Sequence[tuple[Item, Sequence[float]]]) -> BulkOutcome:
        rows: list[tuple[Item, bytes]] = []
        rejected: dict[str, str] = {}
        for item, vec in items:
            if len(vec) != self.dimension:
                raise InvalidInput(
                    f"vector: expected {self.dimension} dimensions, got {len(vec)}", "vector"
                )
            arr = np.asarray(vec, dtype=np.float32)
            if not np.all(np.isfinite(arr)):
                rejected[item.id] = "invalid vector: NaN or infinite values"
                continue
            rows.append((item, arr.tobytes()))
        cols = ", ".join(q.ITEM_COLUMNS)
        updates = ", ".join(f"{col} = excluded.{col}" for col in q.ITEM_COLUMNS if col != "id")
        upsert_sql = (
            f"INSERT INTO items ({cols}) VALUES ({', '.join('?' * len(q.ITEM_COLUMNS))}) "
            f"ON CONFLICT (id) DO UPDATE SET {updates} RETURNING rowid"
        )
        indexed: list[str] = []
        with self._tx(write=True) as c:
            for item, blob in rows:
                rowid = c.execute(upsert_sql, q.item_row(item)).fetchone()[0]
                for table in ("item_tags", "item_stations", "item_refs"):
                    c.execute(f"DELETE FROM {table} WHERE item = ?", (rowid,))
                c.executemany(
                    "INSERT INTO item_tags VALUES (?, ?)", [(rowid, t) for t in item.tags]
                )
                c.executemany(
                    "INSERT INTO item_stations VALUES (?, ?, ?)",
                    [(rowid, s.id, s.name) for s in item.stations],
                )
                c.executemany(
                    "INSERT INTO item_refs VALUES (?, ?)", [(rowid, r) for r in item.references]
                )
                c.execute(
                    "INSERT OR REPLACE INTO vectors (rowid, vector) VALUES (?, ?)", (rowid, blob)
                )
                indexed.append(item.id)
            if indexed:
                self._bump(c)
        return BulkOutcome(indexed=tuple(indexed), rejected=rejected)

    def delete(self, ids: Sequence[str]) -> BulkOutcome:
        unique = list(dict.fromkeys(ids))
        with self._tx(write=True) as c:
            for item_id in unique:
                row = c.execute(
                    "DELETE FROM items WHERE id = ? RETURNING rowid", (item_id,)
                ).fetchone()
                if row is None:
                    continue  # an absent id: nothing to do, as with OpenSearch's 404
                for table in ("item_tags", "item_stations", "item_refs"):
                    c.execute(f"DELETE FROM {table} WHERE item = ?", (row[0],))
                c.execute("DELETE FROM vectors WHERE rowid = ?", (row[0],))
            self._bump(c)
        return BulkOutcome(indexed=tuple(unique))

    # ---- ACLs, principals, tokens -------------------------------------------------------

    def put_acls(self, acls: Sequence[BoardAcl]) -> None:
        with self._tx(write=True) as c:
            c.executemany(
                "INSERT OR REPLACE INTO acls VALUES (?, ?, ?, ?, ?)",
                [(a.board, a.workspace, a.name, json.dumps(list(a.members)), json.dumps(list(a.groups)))
                 for a in acls],
            )  # fmt: skip

    def acls(self, workspace: str) -> list[BoardAcl]:
        with self._tx() as c:
            rows = c.execute(
                "SELECT board, workspace, name, members, groups_ FROM acls WHERE workspace = ? ORDER BY board",
                (workspace,),
            ).fetchall()
        return [
            BoardAcl(b, w, n, tuple(json.loads(m)), tuple(json.loads(g))) for b, w, n, m, g in rows
        ]

    def put_principals(self, principals: Sequence[Principal]) -> None:
        with self._tx(write=True) as c:
            c.executemany(
                "INSERT OR REPLACE INTO principals VALUES (?, ?, ?, ?)",
                [(p.id, p.workspace, p.kind, json.dumps(list(p.groups))) for p in principals],
            )

    def principal(self, principal_id: str) -> Principal | None:
        with self._tx() as c:
            row = c.execute(
                "SELECT id, workspace, kind, groups_ FROM principals WHERE id = ?", (principal_id,)
            ).fetchone()
        return None if row is None else Principal(row[0], row[1], row[2], tuple(json.loads(row[3])))

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None:
        with self._tx(write=True) as c:
            c.execute(
                "INSERT OR REPLACE INTO tokens VALUES (?, ?, ?, ?)",
                (token_hash, principal_id, int(admin), datetime.now(UTC).isoformat()),
            )

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        with self._tx() as c:
            row = c.execute(
                "SELECT principal_id, admin FROM tokens WHERE hash = ?", (token_hash,)
            ).fetchone()
        return None if row is None else (row[0], bool(row[1]))

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        """Revoke by the exact hash (as the OpenSearch backend does)."""
        with self._tx(write=True) as c:
            n = c.execute("DELETE FROM tokens WHERE hash = ?", (token_hash_or_prefix,)).rowcount
        if not n:
            raise NotFound("no such token")
        return int(n)

    # ---- operations --------------------------------------------------------------------

    def ping(self) -> dict[str, object]:
        return {"backend": "embedded", "path": str(self.path), "items": self.count()}

    def close(self) -> None:
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()
        self._matrix = None
