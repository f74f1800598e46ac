"""The indexer on real stores: unchanged items reuse their stored vectors (no model call), and
N processes indexing one file by `--part` together index every line exactly once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from indexer.pipeline import index_stream
from suli.backends.base import KEEP_GONE, Backend
from suli.backends.embedded import EmbeddedBackend
from suli.backends.opensearch import OpenSearchBackend
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.models import Filters, Item
from suli.settings import Settings
from suli.visibility import Visibility

# A reader of workspace "ws" who sees its workspace-wide items (all of this file's items).
READER = Visibility(workspace="ws", principal_id="prn_reader", boards=frozenset())


class CountingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def embed_documents(self, texts, batch_size=None, on_progress=None):  # type: ignore[no-untyped-def]
        self.calls += len(texts)
        return super().embed_documents(texts)


def lines(n: int, changed: int | None = None) -> bytes:
    rows = [
        {
            "id": f"itm_{k}",
            "workspace": "ws",
            "title": f"note {k}" + (" revised" if k == changed else ""),
            "body": f"nonce-{k}",
        }
        for k in range(n)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture(params=["embedded", "opensearch"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    emb = FakeEmbedder()
    if request.param == "embedded":
        backend: Backend = EmbeddedBackend(tmp_path / "suli.db", emb.dimension)
    else:
        url = request.getfixturevalue("opensearch_url")
        alias = request.getfixturevalue("make_index_name")()
        s = Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl", home=tmp_path)
        os_backend = OpenSearchBackend(s, emb.dimension, emb.name)
        os_backend.ensure_ready()
        backend = os_backend
    yield backend
    backend.close()


def test_reupserting_unchanged_items_makes_no_model_call(store: Backend) -> None:
    model = CountingEmbedder()
    first = index_stream(io.BytesIO(lines(120)), store, model, batch_size=32)
    assert (first.indexed, first.embedded, first.reused, model.calls) == (120, 120, 0, 120)
    store.refresh()

    model.calls = 0
    again = index_stream(io.BytesIO(lines(120)), store, model, batch_size=32)
    assert (again.indexed, again.embedded, again.reused, model.calls) == (120, 0, 120, 0)
    store.refresh()

    changed = index_stream(io.BytesIO(lines(120, changed=7)), store, model, batch_size=32)
    assert (changed.embedded, changed.reused, model.calls) == (1, 119, 1)
    store.refresh()
    assert store.count() == 120
    # the reused vectors are what the model gives for the stored text
    got = store.vectors(READER, ["itm_7", "itm_8"])
    want = FakeEmbedder().embed_documents(["note 7 revised nonce-7", "note 8 nonce-8"])
    for n, item_id in enumerate(["itm_7", "itm_8"]):
        assert np.allclose(np.asarray(got[item_id]), want[n], atol=1e-6)


def test_a_kept_vector_is_never_paired_with_text_written_meanwhile(store: Backend) -> None:
    """The indexer reads a hash, someone else rewrites the item, then the indexer's keep-
    the-stored-vector write arrives: refused with a reason, the other write stands."""
    emb = FakeEmbedder()
    mine = Item("itm_1", "ws", "the original title")
    store.upsert([(mine, emb.embed_documents([mine.embed_text()])[0])])
    store.refresh()
    assert store.stored_hashes([("ws", "itm_1")])  # the indexer reads the hash ...
    theirs = Item("itm_1", "ws", "a rewritten title")
    store.upsert([(theirs, emb.embed_documents([theirs.embed_text()])[0])])  # ... meanwhile
    store.refresh()
    out = store.upsert([(mine, None)])  # keep the stored vector: no longer this text's
    assert out.rejected == {"itm_1": KEEP_GONE} and not out.indexed
    store.refresh()
    [(doc, vec)] = [
        (store.get_many(READER, ["itm_1"])["itm_1"], store.vectors(READER, ["itm_1"])["itm_1"])
    ]
    assert doc.title == "a rewritten title"
    assert np.allclose(np.asarray(vec), emb.embed_documents([theirs.embed_text()])[0], atol=1e-6)
    # deleted meanwhile: refused the same way, nothing is written back
    store.stored_hashes([("ws", "itm_1")])
    store.delete("ws", ["itm_1"])
    store.refresh()
    out = store.upsert([(theirs, None)])
    assert out.rejected == {"itm_1": KEEP_GONE}
    store.refresh()
    assert store.count() == 0


def _cli_env(tmp_path: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    return {**env, "SULI_EMBEDDER": "fake", "SULI_HOME": str(tmp_path), **extra}


@pytest.mark.parametrize("backend", ["embedded", "opensearch"])
def test_two_concurrent_indexers_by_part_lose_and_duplicate_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    n = 600
    src = tmp_path / "items.jsonl"
    bad = b'{"id": "broken"\n'  # one bad line: rejected by exactly one part
    src.write_bytes(lines(n)[: len(lines(300))] + bad + lines(n)[len(lines(300)) :])
    if backend == "embedded":
        extra = {"SULI_BACKEND": "embedded", "SULI_EMBEDDED_PATH": str(tmp_path / "suli.db")}
    else:
        alias = request.getfixturevalue("make_index_name")()
        extra = {
            "SULI_BACKEND": "opensearch",
            "SULI_OPENSEARCH_URL": request.getfixturevalue("opensearch_url"),
            "SULI_INDEX_ALIAS": alias,
            "SULI_ACL_INDEX": f"{alias}-acl",
        }
    env = _cli_env(tmp_path, extra)
    suli = str(Path(sys.executable).parent / "suli")
    # Create the store first, so the two processes do not race to create it.
    (tmp_path / "empty.jsonl").write_text("")
    subprocess.run([suli, "index", str(tmp_path / "empty.jsonl")], env=env, check=True)
    procs = [
        subprocess.Popen(
            [
                suli,
                "index",
                "--json",
                "--part",
                f"{i}/2",
                "--rejects",
                str(tmp_path / f"rejects{i}.jsonl"),
                str(src),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in (1, 2)
    ]
    bodies = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode in (0, 1), err.decode()
        bodies.append(json.loads(out))
    assert sum(b["indexed"] for b in bodies) == n
    assert sum(b["rejected"] for b in bodies) == 1
    assert all(b["indexed"] > n / 4 for b in bodies)  # both did real work

    # Count by id and by the content nonce: nothing lost, nothing duplicated.
    s = Settings(
        **{k.removeprefix("SULI_").lower(): v for k, v in env.items() if k.startswith("SULI_")}
    )
    store = open_backend(s, FakeEmbedder())
    try:
        store.refresh()
        assert store.count() == n
        items, total = store.browse(READER, Filters(), limit=n + 10)
        assert total == n
        nonces = Counter(it.body for it in items)
        assert set(nonces) == {f"nonce-{k}" for k in range(n)}  # none lost
        assert max(nonces.values()) == 1  # none duplicated under another id
    finally:
        store.close()
