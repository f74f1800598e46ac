"""`suli status` on the embedded store, `principal|acl|token list`, `token create PRINCIPAL`,
`token revoke`, and `indices drop`'s confirmation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli

PRINCIPALS = [
    {"id": "prn_b", "workspace": "ws", "kind": "agent", "groups": []},
    {"id": "prn_a", "workspace": "ws", "kind": "person", "groups": ["g"]},
]
ACLS = [{"board": "brd_x", "workspace": "ws", "name": "X", "members": ["prn_a"], "groups": []}]


def suli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    env = {"SULI_HOME": str(tmp_path / "home"), "SULI_EMBEDDER": "fake", "SULI_BACKEND": ""}
    r = CliRunner().invoke(cli, ["--backend", "embedded", *args], env=env)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def loaded(tmp_path: Path) -> Path:
    (tmp_path / "p.json").write_text(json.dumps(PRINCIPALS))
    (tmp_path / "a.json").write_text(json.dumps(ACLS))
    assert suli(tmp_path, "principal", "load", str(tmp_path / "p.json"))[0] == 0
    assert suli(tmp_path, "acl", "load", str(tmp_path / "a.json"))[0] == 0
    return tmp_path


def test_lists_show_what_was_loaded(loaded: Path) -> None:
    code, out, _ = suli(loaded, "principal", "list", "--json")
    assert code == 0
    assert json.loads(out) == sorted(PRINCIPALS, key=lambda p: p["id"])
    assert "2 principals in the embedded store" in suli(loaded, "principal", "list")[2]
    code, out, _ = suli(loaded, "acl", "list", "--json")
    assert json.loads(out) == ACLS
    assert json.loads(suli(loaded, "acl", "list", "--workspace", "other", "--json")[1]) == []


def test_token_create_positional_list_and_revoke(loaded: Path) -> None:
    code, token, _ = suli(loaded, "token", "create", "prn_a")
    assert code == 0 and token.startswith("suli_")
    assert suli(loaded, "token", "create", "--principal", "prn_b", "--admin")[0] == 0
    assert suli(loaded, "token", "create", "prn_a", "--principal", "prn_b")[0] == 2
    code, out, _ = suli(loaded, "token", "list", "--json")
    rows = json.loads(out)
    assert [(r["principal"], r["admin"]) for r in rows] == [("prn_a", False), ("prn_b", True)]
    assert token.strip() not in out  # only hashes are stored and shown
    assert suli(loaded, "token", "revoke", rows[0]["hash"])[0] == 0
    left = json.loads(suli(loaded, "token", "list", "--json")[1])
    assert [r["principal"] for r in left] == ["prn_b"]


def test_status_on_the_embedded_store_reads_nothing_from_the_cwd(
    loaded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(loaded)
    (loaded / "stray.rejects.jsonl").write_text('{"line": 1}\n')
    (loaded / "home" / "rejects").mkdir()
    (loaded / "home" / "rejects" / "run.rejects.jsonl").write_text('{"line": 1}\n{"line": 2}\n')
    code, out, _ = suli(loaded, "status", "--json")
    assert code == 0
    body = json.loads(out)
    assert body["backend"] == "embedded" and body["path"].endswith("suli.db")
    assert (body["items"], body["principals"], body["boards"]) == (0, 2, 1)
    assert body["rejects"]["total"] == 2  # $SULI_HOME/rejects only
    code, out, _ = suli(loaded, "status")
    assert code == 0 and "2 principals" in out


def test_status_of_a_missing_store_does_not_create_it(tmp_path: Path) -> None:
    code, out, _ = suli(tmp_path, "status")
    assert code == 0 and "missing" in out and "suli index" in out
    assert not (tmp_path / "home" / "suli.db").exists()


def test_indices_drop_asks_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cli import ops as cli_ops

    dropped: list[str] = []
    monkeypatch.setattr("indexer.inventory.drop", lambda _c, _a, name: dropped.append(name))
    monkeypatch.setattr("suli.backends.opensearch.OpenSearchBackend", lambda *a: _NoClient())
    env = {"SULI_OPENSEARCH_URL": "http://127.0.0.1:1", "SULI_HOME": str(tmp_path)}
    run = CliRunner().invoke
    no_tty = run(cli, ["indices", "drop", "suli-items-v1-1"], env=env)
    assert no_tty.exit_code == 2 and "--yes" in no_tty.stderr and not dropped
    monkeypatch.setattr(cli_ops, "_interactive", lambda: True)
    refused = run(cli, ["indices", "drop", "suli-items-v1-1"], env=env, input="n\n")
    assert refused.exit_code == 1 and not dropped
    agreed = run(cli, ["indices", "drop", "suli-items-v1-1"], env=env, input="y\n")
    assert agreed.exit_code == 0 and dropped == ["suli-items-v1-1"]
    assert run(cli, ["indices", "drop", "x", "--yes"], env=env).exit_code == 0
    assert dropped == ["suli-items-v1-1", "x"]


class _NoClient:
    """Stands in for the backend object only: drop() itself is replaced above (pure CLI test)."""

    client = None
    alias = "suli-items"

    def close(self) -> None:
        pass
