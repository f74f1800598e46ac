"""A bad SULI_* setting: every command that reads settings says which variable and how to fix
it in one line, exit 2, no traceback (caught once, at the CLI's edge)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.main import cli

# Commands that never read Settings: the local node manager (its own state dir) and the
# item schema (static).
NO_SETTINGS = ("cluster", "schema")

BAD = {
    "SULI_BACKEND": ({"SULI_BACKEND": "opensearch"}, "SULI_OPENSEARCH_URL"),
    "SULI_RRF_K": ({"SULI_RRF_K": "abc"}, "SULI_RRF_K=abc"),
    "SULI_OUTCOME_WEIGHTS": ({"SULI_OUTCOME_WEIGHTS": '{"bogus":0.4}'}, "bogus"),
}


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name in sorted(group.list_commands(click.Context(group))):
        cmd = group.get_command(click.Context(group), name)
        assert cmd is not None
        if isinstance(cmd, click.Group):
            out += _leaves(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


def _command(path: tuple[str, ...]) -> click.Command:
    cmd: click.Command = cli
    for name in path:
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(click.Context(cmd), name)
        assert sub is not None, name
        cmd = sub
    return cmd


def _minimal_args(path: tuple[str, ...], existing: Path) -> list[str]:
    """The command with a placeholder for every required argument and option."""
    args = list(path)
    for p in _command(path).params:
        # --as is needed without --url even where Click cannot require it.
        if not (p.required or isinstance(p, click.Argument) or p.name == "principal_id"):
            continue
        value = str(existing) if isinstance(p.type, click.Path) else "x"
        if isinstance(p, click.Option):
            args += [p.opts[0], value]
        else:
            args += [value] * max(p.nargs, 1)
    return args


COMMANDS = [p for p in _leaves(cli) if p[0] not in NO_SETTINGS]


def test_the_walk_sees_the_commands() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"search", "show", "index", "serve", "demo", "status", "token create"} <= names


CASES = [
    (path, bad)
    for path in COMMANDS
    for bad in sorted(BAD)
    # The demo always uses its own embedded store, whatever SULI_BACKEND says.
    if not (path == ("demo",) and bad == "SULI_BACKEND")
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("path", "bad"), CASES, ids=[f"{' '.join(p)}-{b}" for p, b in CASES])
def test_bad_setting_is_one_line_and_exit_2(
    path: tuple[str, ...], bad: str, tmp_path: Path
) -> None:
    env, named = BAD[bad]
    existing = tmp_path / "in.json"
    existing.write_text("[]\n")
    env = {**env, "SULI_HOME": str(tmp_path / "home"), "SULI_EMBEDDER": "fake"}
    args = _minimal_args(path, existing) + (["--no-serve"] if path == ("demo",) else [])
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and bad in lines[0] and named in lines[0]
    assert "Traceback" not in result.output and not isinstance(result.exception, ValueError)
    assert not (tmp_path / "home").exists()  # nothing was created


def test_fix_is_named() -> None:
    result = CliRunner().invoke(cli, ["facets", "--as", "x"], env={"SULI_BACKEND": "opensearch"})
    assert "SULI_BACKEND=embedded" in result.stderr and "SULI_OPENSEARCH_URL=http" in result.stderr
    result = CliRunner().invoke(cli, ["facets", "--as", "x"], env={"SULI_RRF_K": "abc"})
    assert "default: 60" in result.stderr
