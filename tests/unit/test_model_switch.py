"""A store records the embedding model its vectors come from; a search or index run with
another model is refused in one line naming both models and `suli reindex`, which re-embeds
(embedded store here; OpenSearch in tests/integration/test_opensearch_model_guard.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from suli.backends.embedded import EmbeddedBackend
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.errors import ModelMismatch
from suli.settings import Settings

ITEMS = [
    {"id": "itm_1", "workspace": "ws", "title": "Deploy checklist", "body": "steps"},
    {"id": "itm_2", "workspace": "ws", "title": "Rollback", "body": "undo the release"},
]


class OtherModel(FakeEmbedder):
    """Another model of the same dimension (the case a dimension check cannot see)."""

    def __init__(self) -> None:
        super().__init__(384)
        self.name = "other-model-384"


def suli(tmp_path: Path, embedder: str, *args: str) -> tuple[int, str, str]:
    env = {"SULI_HOME": str(tmp_path / "home"), "SULI_EMBEDDER": embedder, "SULI_BACKEND": ""}
    db = str(tmp_path / "store.db")
    r = CliRunner().invoke(cli, ["--backend", "embedded", "--db", db, *args], env=env)
    return r.exit_code, r.stdout, r.stderr


def stored_model(path: Path) -> str:
    with sqlite3.connect(path) as c:
        return str(c.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()[0])


def test_the_core_opens_the_store_with_its_model_and_refuses_another(tmp_path: Path) -> None:
    settings = Settings(backend="embedded", embedded_path=tmp_path / "s.db", embedder="fake")
    first = FakeEmbedder(384)
    open_backend(settings, first).close()
    assert stored_model(tmp_path / "s.db") == first.name  # recorded on creation
    with pytest.raises(ModelMismatch) as e:
        open_backend(settings, OtherModel())
    msg = e.value.message
    assert "\n" not in msg
    assert first.name in msg and "other-model-384" in msg and "`suli reindex`" in msg
    open_backend(settings, first).close()  # the same model still opens


def test_a_store_from_before_the_model_was_recorded_takes_the_first_model(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    EmbeddedBackend(path, 384).close()  # what open_backend made before: no model recorded
    assert stored_model(path) == ""
    EmbeddedBackend(path, 384, model="fake-hash-384").close()
    assert stored_model(path) == "fake-hash-384"
    with pytest.raises(ModelMismatch):
        EmbeddedBackend(path, 384, model="other-model-384")


def test_search_and_index_refuse_another_model_until_reindex(tmp_path: Path) -> None:
    lines = tmp_path / "items.jsonl"
    lines.write_text("".join(json.dumps(d) + "\n" for d in ITEMS))
    (tmp_path / "p.json").write_text(json.dumps([{"id": "prn_a", "workspace": "ws"}]))
    assert suli(tmp_path, "fake", "principal", "load", str(tmp_path / "p.json"))[0] == 0
    code, out, _ = suli(tmp_path, "fake", "index", str(lines), "--json")
    assert code == 0 and json.loads(out)["embedded"] == 2

    # The bundled model has 384 dimensions too: only the recorded model tells them apart.
    for args in (["search", "deploy", "--as", "prn_a"], ["index", str(lines)]):
        code, out, err = suli(tmp_path, "minilm", *args)
        assert code == 1, (args, out, err)
        [line] = err.strip().splitlines()
        assert "'fake-hash-384'" in line and "'all-MiniLM-L6-v2-int8'" in line
        assert "`suli reindex`" in line
    assert stored_model(tmp_path / "store.db") == "fake-hash-384"  # nothing changed

    code, out, err = suli(tmp_path, "minilm", "reindex", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["model"] == {"before": "fake-hash-384", "after": "all-MiniLM-L6-v2-int8"}
    assert (body["items"], body["embedded"], body["reused"]) == (2, 2, 0)
    assert stored_model(tmp_path / "store.db") == "all-MiniLM-L6-v2-int8"
    code, out, _ = suli(tmp_path, "minilm", "index", str(lines), "--json")
    assert code == 0 and (json.loads(out)["embedded"], json.loads(out)["reused"]) == (0, 2)
    code, out, _ = suli(tmp_path, "minilm", "search", "deploy", "--as", "prn_a", "--json")
    assert code == 0 and json.loads(out)["results"][0]["id"] == "itm_1"
    assert suli(tmp_path, "fake", "search", "deploy", "--as", "prn_a")[0] == 1  # now the old one
