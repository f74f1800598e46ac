"""The embedded backend's parts work alone: the directory and the item index each built over a
`StoreFile` of their own, with no `EmbeddedBackend` around them, and the backend composes them
over one file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from suli.backends.base import Directory, ItemIndex, LegQuery, PageQuery
from suli.backends.embedded import EmbeddedBackend
from suli.backends.embedded.db import StoreFile
from suli.backends.embedded.directory import EmbeddedDirectory
from suli.backends.embedded.items import ItemStore
from suli.errors import BackendUnavailable, NotFound
from suli.models import BoardAcl, Filters, Item, Principal
from suli.visibility import Visibility, visibility_for

DIM = 4


def axis(i: int) -> list[float]:
    return [1.0 if n == i else 0.0 for n in range(DIM)]


def test_the_directory_alone_keeps_acls_principals_tokens_and_sessions(tmp_path: Path) -> None:
    db = StoreFile(tmp_path / "dir.db", DIM)
    directory: Directory = EmbeddedDirectory(db)
    acl = BoardAcl("brd_1", "ws", "One", ("prn_a",))
    directory.put_acls([acl, BoardAcl("brd_2", "other")])
    directory.put_principals([Principal("prn_a", "ws", "agent", ("g",))])
    assert directory.claim_principal(Principal("prn_a", "other")) is False  # another workspace's
    directory.put_token("h" * 64, "prn_a", True)

    session = directory.session("h" * 64)
    assert session is not None and session.admin
    assert session.principal == Principal("prn_a", "ws", "agent", ("g",))
    assert session.acls == (acl,)
    assert directory.acl("ws", "brd_1") == acl and directory.acl("ws", "brd_2") is None
    assert directory.stored_visibility(Principal("prn_a", "ws")) is None  # read, not stored
    assert directory.token_visibility("h" * 64) is None

    part = EmbeddedDirectory(db)  # the admin listings are the part's too
    assert [a.board for a in part.list_acls()] == ["brd_1", "brd_2"]
    assert [p.id for p in part.list_principals()] == ["prn_a"]
    assert [(t.principal_id, t.admin) for t in part.list_tokens()] == [("prn_a", True)]
    assert part.revoke_token("h" * 64) == 1
    with pytest.raises(NotFound):
        part.revoke_token("h" * 64)
    db.close()

    conn = sqlite3.connect(tmp_path / "dir.db")  # the directory wrote no item
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0
    conn.close()


def test_the_item_index_alone_writes_searches_and_reads_back(tmp_path: Path) -> None:
    db = StoreFile(tmp_path / "items.db", DIM, model="m")
    items = ItemStore(db)
    index: ItemIndex = items
    assert (index.dimension, index.model) == (DIM, "m")
    vis = Visibility("ws", "prn_x", frozenset())  # resolved by the caller: no ACL is read
    out = index.upsert(
        [(Item("itm_1", "ws", "zebrafish fins"), axis(0)), (Item("itm_2", "ws", "otter"), axis(1))]
    )
    assert out.indexed == ("itm_1", "itm_2")

    legs = index.search(LegQuery(vis, Filters(), "zebrafish", axis(1), 5))
    assert [h.id for h in legs.text] == ["itm_1"]
    assert legs.vector[0].id == "itm_2"
    page = index.page(PageQuery(vis, ("itm_1", "itm_2")))
    assert sorted(page.items) == ["itm_1", "itm_2"]
    assert sorted(index.get_many(vis, ["itm_2"])) == ["itm_2"]
    assert index.browse(vis, Filters(), 10)[1] == 2
    assert items.count() == 2 and [i.id for i in items.all_items()] == ["itm_1", "itm_2"]
    assert index.delete("ws", ["itm_2", "itm_9"]).missing == ("itm_9",)
    assert items.ping() == {"backend": "embedded", "path": str(db.path), "items": 1}

    index.close()  # closes the file it was given
    with pytest.raises(BackendUnavailable):
        items.count()

    conn = sqlite3.connect(tmp_path / "items.db")  # the item index wrote no directory row
    for table in ("acls", "principals", "tokens"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
    conn.close()


def test_the_backend_composes_both_parts_over_one_file(tmp_path: Path) -> None:
    backend = EmbeddedBackend(tmp_path / "suli.db", DIM, model="m")
    assert backend.items.db is backend.directory.db is backend.db
    assert (backend.path, backend.dimension, backend.model) == (tmp_path / "suli.db", DIM, "m")
    assert backend.stored_model == "m" and backend.check_model

    # What one part writes the other reads through the backend: one file.
    backend.directory.put_acls([BoardAcl("brd_1", "ws", "One", ("prn_a",))])
    backend.directory.put_principals([Principal("prn_a", "ws")])
    backend.items.upsert([(Item("itm_1", "ws", "on the board", board="brd_1"), axis(0))])
    me = backend.principal("prn_a")
    assert me is not None
    vis = visibility_for(me, backend.acls("ws"))
    assert [h.id for h in backend.search(LegQuery(vis, Filters(), "board", None, 5)).text] == [
        "itm_1"
    ]

    backend.close()
    with pytest.raises(BackendUnavailable):
        backend.acls("ws")
