"""`suli` starts at once: importing the CLI pulls in none of the heavy stack, each command loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cli.main import COMMANDS, cli, load_command

HEAVY = ("fastapi", "mcp", "uvicorn", "onnxruntime", "opensearchpy", "numpy", "starlette")


def _modules_after(code: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after running code."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {name.split(".")[0] for name in json.loads(out.splitlines()[-1])}


def test_importing_the_cli_imports_no_heavy_package() -> None:
    loaded = _modules_after("import cli.main")
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_version_runs_without_the_heavy_stack() -> None:
    loaded = _modules_after(
        "from click.testing import CliRunner\nfrom cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['--version'])\nassert r.exit_code == 0, r.output"
    )
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_listed_command_loads_under_its_name(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    assert cli.get_command(click.Context(cli), name) is command


def test_help_lists_every_command() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.output or f"  {name}\n" in result.output, name


def test_an_unknown_command_is_a_usage_error() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["serach"])
    assert result.exit_code == 2
    assert "No such command" in result.output


@pytest.mark.parametrize(
    ("args", "unneeded"),
    [
        # The embedded store's status draws no bar and opens no OpenSearch client.
        (["--backend", "embedded", "status"], {"rich", "opensearchpy", "httpx", "onnxruntime"}),
        (["acl", "list"], {"rich", "opensearchpy", "httpx", "onnxruntime"}),
        (["schema", "principal"], {"rich", "httpx", "numpy", "onnxruntime"}),
        # A local search asks no service (httpx is for --url only) and finds no vector to make.
        (["search", "--as", "prn_x"], {"rich", "httpx", "opensearchpy", "onnxruntime"}),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_commands_import_only_what_they_use(
    tmp_path: Path, args: list[str], unneeded: set[str]
) -> None:
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom cli.main import cli\n"
        f"r = CliRunner().invoke(cli, {args!r}, env={{'SULI_HOME': {str(tmp_path)!r}, "
        "'SULI_EMBEDDER': 'fake', 'SULI_BACKEND': ''})\n"
        "assert r.exit_code in (0, 2), r.output"  # 2: prn_x is unknown to the empty store
    )
    loaded = _modules_after(code)
    assert loaded.isdisjoint(unneeded), sorted(loaded & unneeded)
