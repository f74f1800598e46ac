"""`suli index` rejects: where they go (a file, stdin, --rejects), what is said when they cannot
be written, and which files `suli status --rejects DIR` counts."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from cli.rejects import rejects_files


def item(n: int) -> str:
    return json.dumps({"id": f"itm_{n}", "workspace": "ws", "title": f"deploy note {n}"})


GOOD_AND_BAD = "\n".join([item(1), '{"id": "itm_x", "workspace": "ws"}', item(2), "{oops"]) + "\n"


def suli(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    env = {"SULI_HOME": str(tmp_path / "home"), "SULI_EMBEDDER": "fake", "SULI_BACKEND": ""}
    r = CliRunner().invoke(cli, ["--backend", "embedded", *args], env=env, input=stdin)
    return r.exit_code, r.stdout, r.stderr


def indexed(tmp_path: Path) -> int:
    code, out, _ = suli(tmp_path, "status", "--json")
    assert code == 0
    return int(json.loads(out)["items"])


def test_rejects_go_beside_the_file_and_are_named(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text(GOOD_AND_BAD)
    code, _, err = suli(tmp_path, "index", str(src))
    assert code == 1
    assert "read 4, indexed 2, rejected 2" in err
    target = tmp_path / "items.jsonl.rejects.jsonl"
    assert f"rejects written to {target}" in err
    lines = [json.loads(x) for x in target.read_text().splitlines()]
    assert [(r["line"], r["id"]) for r in lines] == [(2, "itm_x"), (4, None)]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_an_unwritable_rejects_file_is_an_error_after_the_summary(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text(GOOD_AND_BAD)
    # A folder in the file's place cannot be opened for writing, even by root (a read-only
    # folder would not stop root, who runs this suite in some containers).
    (tmp_path / "items.jsonl.rejects.jsonl").mkdir()
    code, out, err = suli(tmp_path, "index", str(src))
    assert code == 1 and "Traceback" not in err
    assert "read 4, indexed 2, rejected 2" in err
    assert "line 2 (itm_x): title" in err and "line 4: invalid JSON" in err
    assert f"Error: cannot write the rejects file {tmp_path / 'items.jsonl.rejects.jsonl'}" in err
    assert "--rejects PATH" in err and "rejects written to" not in err
    assert indexed(tmp_path) == 2  # the good lines went in all the same
    code, out, err = suli(tmp_path, "index", str(src), "--json")
    body = json.loads(out)
    assert code == 1 and body["rejects_file"] is None and "--rejects PATH" in body["rejects_error"]
    assert (body["indexed"], body["rejected"]) == (2, 2)


def test_rejects_go_where_the_option_says(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text(GOOD_AND_BAD)
    target = tmp_path / "new" / "folder" / "r.jsonl"
    code, out, _ = suli(tmp_path, "index", str(src), "--rejects", str(target), "--json")
    assert code == 1 and json.loads(out)["rejects_file"] == str(target)
    assert len(target.read_text().splitlines()) == 2
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    code, _, err = suli(tmp_path, "index", str(src), "--rejects", str(blocked / "r.jsonl"))
    assert code == 1 and f"cannot write the rejects file {blocked / 'r.jsonl'}" in err


def test_stdin_rejects_go_to_the_home_rejects_folder_and_status_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = suli(tmp_path, "index", "-", stdin=GOOD_AND_BAD)
    assert code == 1
    [target] = (tmp_path / "home" / "rejects").glob("stdin-*.rejects.jsonl")
    assert f"rejects written to {target}" in err
    assert not list(tmp_path.glob("*.jsonl"))  # nothing in the current directory
    body = json.loads(suli(tmp_path, "status", "--json")[1])
    assert body["rejects"] == {"files": [{"path": str(target), "lines": 2}], "total": 2}
    mine = tmp_path / "mine.jsonl"
    code, _, err = suli(tmp_path, "index", "-", "--rejects", str(mine), stdin=GOOD_AND_BAD)
    assert f"rejects written to {mine}" in err and len(mine.read_text().splitlines()) == 2


def test_status_counts_rejects_files_not_the_inputs_beside_them(tmp_path: Path) -> None:
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "items.jsonl").write_text("\n".join(item(n) for n in range(219)) + "\n")
    (folder / "items.jsonl.rejects.jsonl").write_text('{"line": 3}\n' * 8)
    (folder / "reindex-suli-items-v2-1.jsonl").write_text('{"id": "x"}\n')
    (folder / "notes.txt").write_text("not rejects\n")
    code, out, _ = suli(tmp_path, "status", "--rejects", str(folder), "--json")
    assert code == 0
    assert json.loads(out)["rejects"]["total"] == 9
    named = folder / "items.jsonl"  # a file named outright is counted, whatever its name
    assert rejects_files([named, folder]) == [
        named,
        folder / "items.jsonl.rejects.jsonl",
        folder / "reindex-suli-items-v2-1.jsonl",
    ]
