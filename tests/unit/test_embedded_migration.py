"""An embedded store of format 2 (ids unique across workspaces) opens as format 3 in place."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from suli.backends.base import LegQuery
from suli.backends.embedded import EmbeddedBackend
from suli.backends.embedded import sql as q
from suli.models import BoardAcl, Filters, Item
from suli.visibility import Visibility

DIM = 8
# The two tables format 3 changed, exactly as format 2 created them (frozen history).
V2_ITEMS = """CREATE TABLE items (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE, workspace TEXT NOT NULL, kind TEXT NOT NULL,
    scope TEXT NOT NULL, outcome TEXT, board TEXT, uploader TEXT, agent TEXT,
    title TEXT NOT NULL, body TEXT NOT NULL, caption TEXT NOT NULL, path TEXT NOT NULL,
    tags TEXT NOT NULL, tags_text TEXT NOT NULL, stations TEXT NOT NULL,
    superseded_by TEXT, refs TEXT NOT NULL, media_type TEXT NOT NULL, url TEXT NOT NULL,
    provenance TEXT NOT NULL, created_at TEXT, updated_at TEXT, last_activity_at TEXT,
    last_ts REAL, hidden INTEGER NOT NULL)"""
V2_ACLS = """CREATE TABLE acls (board TEXT PRIMARY KEY, workspace TEXT NOT NULL,
    name TEXT NOT NULL, members TEXT NOT NULL, groups_ TEXT NOT NULL)"""


def _v2_store(path: Path, items: list[Item]) -> None:
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute(V2_ITEMS)
    c.execute(V2_ACLS)
    c.execute("CREATE INDEX acls_workspace ON acls (workspace)")
    for ddl in q.schema(DIM):  # the rest (meta, vectors, side tables, FTS) did not change
        if "EXISTS items (" not in ddl and "EXISTS acls (" not in ddl:
            c.execute(ddl)
    c.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("schema", "2"), ("dimension", str(DIM)), ("model", ""), ("generation", "1")],
    )
    cols = ", ".join(q.ITEM_COLUMNS)
    for n, it in enumerate(items):
        rowid = c.execute(
            f"INSERT INTO items ({cols}) VALUES ({', '.join('?' * len(q.ITEM_COLUMNS))}) "
            "RETURNING rowid",
            q.item_row(it),
        ).fetchone()[0]
        c.executemany("INSERT INTO item_tags VALUES (?, ?)", [(rowid, t) for t in it.tags])
        vec = np.zeros(DIM, np.float32)
        vec[n % DIM] = 1.0
        c.execute("INSERT INTO vectors VALUES (?, 1, ?)", (rowid, vec.tobytes()))
    c.execute("INSERT INTO acls VALUES ('brd_x', 'ws_a', 'X', ?, '[]')", (json.dumps(["prn_p"]),))
    c.close()


def test_a_format_2_store_is_rekeyed_in_place_and_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    items = [
        Item("itm_1", "ws_a", "zebra one", tags=("t1",)),
        Item("itm_2", "ws_b", "zebra two", tags=("t2",)),
    ]
    _v2_store(path, items)
    store = EmbeddedBackend(path, DIM)
    try:
        vis_a = Visibility("ws_a", "prn_p", frozenset({"brd_x"}))
        text = store.search(LegQuery(vis_a, Filters(), "zebra", None, 5)).text
        assert [h.id for h in text] == ["itm_1"]  # FTS rows still point at the right rows
        assert store.get_many(vis_a, ["itm_1"]) == {"itm_1": items[0]}
        vec = store.search(LegQuery(vis_a, Filters(), None, [1.0] + [0.0] * 7, 5)).vector
        assert [h.id for h in vec] == ["itm_1"]
        assert store.facets(vis_a, Filters()).values["tag"] == [("t1", 1)]
        assert store.acl("ws_a", "brd_x") == BoardAcl("brd_x", "ws_a", "X", ("prn_p",), ())
        # The same id in another workspace is now a second item, and deletes stay in theirs.
        store.upsert([(Item("itm_1", "ws_b", "zebra twin"), [0.0] * 7 + [1.0])])
        assert store.count() == 3
        assert store.get_many(vis_a, ["itm_1"])["itm_1"] == items[0]
        out = store.delete("ws_b", ["itm_1"])
        assert out.indexed == ("itm_1",) and store.get_many(vis_a, ["itm_1"])
        store.put_acls([BoardAcl("brd_x", "ws_b", "B's X", (), ())])
        assert store.acl("ws_a", "brd_x") is not None and store.acl("ws_b", "brd_x") is not None
    finally:
        store.close()
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("3",)
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for table in q.FTS_TABLES.values():  # the external-content index matches the rows
            c.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    EmbeddedBackend(path, DIM).close()  # a migrated store opens again as it is
