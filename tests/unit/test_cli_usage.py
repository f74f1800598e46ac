"""The first day's usage errors and messages: the demo's own OpenSearch alias, `--db` that cannot
apply, global options after the command, `cluster up`'s refusal naming the state dir, `suli
index`'s exit code in --help, a refused principal/ACL file naming the entry, plurals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import devcluster
from cli.demo import DEMO_ACL_INDEX, DEMO_ALIAS, _demo_settings, store_args
from cli.main import cli
from devcluster import cluster as devcluster_cluster
from devcluster.cluster import SPEC_FILE
from devcluster.jdk import Jdk


def run(args: list[str], tmp_path: Path, **env: str | None) -> Any:
    base: dict[str, str | None] = {
        "SULI_HOME": str(tmp_path / "home"),
        "SULI_EMBEDDER": "fake",
        "SULI_BACKEND": None,
        "SULI_OPENSEARCH_URL": None,
    }
    return CliRunner().invoke(cli, args, env={**base, **env})


# ---- 1. the demo keeps to its own alias and ACL index on OpenSearch ---------------------------


def test_the_demo_on_opensearch_has_its_own_alias_whatever_the_shell_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SULI_OPENSEARCH_URL", "http://127.0.0.1:9200")
    monkeypatch.setenv("SULI_INDEX_ALIAS", "my-items")  # the user's own data: never the demo's
    monkeypatch.setenv("SULI_ACL_INDEX", "my-acl")
    ctx = click.Context(cli, obj={"overrides": {}})
    s = _demo_settings(ctx, "opensearch", None)
    assert (s.index_alias, s.acl_index) == (DEMO_ALIAS, DEMO_ACL_INDEX)
    assert s.index_alias != "suli-items" and s.acl_index != "suli-acl"
    printed = store_args(s)  # what the demo prints to point commands at its store
    assert f"--index-alias {DEMO_ALIAS} --acl-index {DEMO_ACL_INDEX}" in printed
    named = click.Context(cli, obj={"overrides": {"index_alias": "t1", "acl_index": "t1-acl"}})
    assert _demo_settings(named, "opensearch", None).index_alias == "t1"  # options before `demo`


# ---- 2. options of the backend not in use ------------------------------------------------------


def test_db_with_opensearch_chosen_is_a_usage_error_naming_why(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    r = run(["--db", db, "search", "x", "--as", "prn_ana"], tmp_path,
            SULI_OPENSEARCH_URL="http://127.0.0.1:9")  # fmt: skip
    assert r.exit_code == 2
    assert "--db is the embedded store's file, but SULI_OPENSEARCH_URL is set" in r.stderr
    assert "--backend embedded" in r.stderr
    r = run(["--backend", "opensearch", "--opensearch-url", "http://x:9", "--db", db, "status"],
            tmp_path)  # fmt: skip
    assert r.exit_code == 2 and "but --backend opensearch" in r.stderr
    # Said explicitly, the file is read even with the URL set.
    r = run(["--backend", "embedded", "--db", db, "principal", "list"], tmp_path,
            SULI_OPENSEARCH_URL="http://127.0.0.1:9")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = run(["--index-alias", "a", "status"], tmp_path)
    assert r.exit_code == 2 and "--index-alias names an OpenSearch index" in r.stderr


def test_a_global_option_after_the_command_says_where_it_goes(tmp_path: Path) -> None:
    r = run(["search", "x", "--db", "a.db", "--as", "prn_ana"], tmp_path)
    assert r.exit_code == 2
    assert "--db is a global option: give it before the command" in r.stderr
    assert "--kind" not in r.stderr and "--mode" not in r.stderr
    r = run(["acl", "list", "--backend", "embedded"], tmp_path)
    assert r.exit_code == 2 and "--backend is a global option" in r.stderr
    r = run(["search", "x", "--nope"], tmp_path)  # any other unknown option: Click's own
    assert r.exit_code == 2 and "No such option '--nope'" in r.stderr


# ---- 4. cluster up's refusal names the state dir in use ----------------------------------------


def test_up_over_another_running_cluster_names_the_exact_down_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "my state"  # a space: the printed command must quote it
    state.mkdir()
    other = devcluster.ClusterSpec(nodes=3, http_port=9440, transport_port=9540)
    (state / SPEC_FILE).write_text(other.to_json())
    monkeypatch.setattr(devcluster_cluster.Cluster, "running", lambda self: [0, 1, 2])
    fake = Jdk(tmp_path / "jdk", "21.0.7")
    monkeypatch.setattr(devcluster_cluster, "choose", lambda *a, **kw: fake)
    r = CliRunner().invoke(cli, ["cluster", "--state-dir", str(state), "up"])
    assert r.exit_code == 1
    assert f"`suli cluster --state-dir '{state}' down` first" in r.output
    assert "`suli cluster down`" not in r.output  # that stops the default cluster


# ---- 5. index's exit code, a refused file's entry ---------------------------------------------


def test_index_help_says_when_it_exits_1(tmp_path: Path) -> None:
    out = run(["index", "--help"], tmp_path).output
    assert "1 when any line was rejected" in " ".join(out.split())


@pytest.mark.parametrize("what", ["principal", "acl"])
def test_a_refused_file_names_the_entry_and_the_field(tmp_path: Path, what: str) -> None:
    good = (
        {"id": "prn_a", "workspace": "ws", "kind": "person", "groups": []}
        if what == "principal"
        else {"board": "brd_a", "workspace": "ws", "name": "A", "members": [], "groups": []}
    )
    bad = (
        {"id": "prn_b", "workspace": "ws", "kind": "robot", "groups": []}
        if what == "principal"
        else {"board": "brd_b", "workspace": "ws", "name": "B", "members": "prn_a", "groups": []}
    )
    f = tmp_path / "f.json"
    f.write_text(json.dumps([good, bad]))
    r = run(["--backend", "embedded", what, "load", str(f)], tmp_path)
    assert r.exit_code == 2
    field = "kind" if what == "principal" else "members"
    assert "entry 2 (index 1" in r.stderr and f"): {field}:" in r.stderr, r.stderr
    if what == "principal":
        assert "id 'prn_b'" in r.stderr
    listed = run(["--backend", "embedded", what, "list", "--json"], tmp_path)
    assert json.loads(listed.stdout) == []  # nothing written


def test_counts_take_the_right_number(tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    f.write_text(json.dumps([{"board": "brd_a", "workspace": "ws", "name": "A"}]))
    r = run(["--backend", "embedded", "acl", "load", str(f)], tmp_path)
    assert r.exit_code == 0 and "loaded 1 board ACL\n" in r.stderr
    f.write_text(json.dumps([{"id": "prn_a", "workspace": "ws", "kind": "person"}]))
    r = run(["--backend", "embedded", "principal", "load", str(f)], tmp_path)
    assert "loaded 1 principal\n" in r.stderr


# ---- 9. what users see -------------------------------------------------------------------------


def _groups(group: click.Group, ctx: click.Context, path: list[str]) -> list[list[str]]:
    out = [path]
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if isinstance(sub, click.Group):
            out += _groups(sub, ctx, [*path, name])
    return out


def test_no_command_summary_is_cut_off_at_80_columns(tmp_path: Path) -> None:
    ctx = click.Context(cli)
    for path in _groups(cli, ctx, []):
        out = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80).output
        listed = out.split("Commands:\n", 1)[1].splitlines()
        cut = [line for line in listed if line.rstrip().endswith("...")]
        assert not cut, (path, cut)


def test_the_hybrid_paging_footer_says_what_its_number_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli.output import print_results

    body = {"results": [], "total": 173, "total_relation": "eq", "paging_limit": 118,
            "timings_ms": {"total": 5.0}, "has_more": True}  # fmt: skip
    print_results(body, "--page 2")
    err = capsys.readouterr().err
    assert "hybrid paging reaches only the 118 best-fused of them" in err
    assert "--mode text pages through all" in err


def test_the_index_bar_keeps_its_count_on_80_columns() -> None:
    from rich.console import Console

    from cli.admin import index_progress

    console = Console(width=80, force_terminal=False)
    progress = index_progress(console)
    task = progress.add_task("index", total=100_000, counts="embedded 99999, reused 0, cached 1")
    progress.update(task, completed=100_000)
    line = _render(console, progress)
    assert "100000/100000" in line and "…" not in line


def _render(console: Any, progress: Any) -> str:
    with console.capture() as cap:
        console.print(progress.get_renderable())
    return str(cap.get())
