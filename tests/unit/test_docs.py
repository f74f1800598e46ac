"""Docs stay true: every `suli ...` command in README.md and docs/*.md parses against the real
Click CLI (the command exists, its options exist, its arguments fit), without running it. In
the spirit of sqlite-utils' tests/test_docs.py. Also: the README's measured figures are the
ones of bench/RESULTS.md's summary, and every raw file the results name exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from cli.main import cli

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# What may precede the command: a shell prompt, a venv path, environment assignments, or the
# compose one-shot service that runs `suli` (docker-compose.yml's suli-admin).
_PREFIX = re.compile(
    r"^(?:\$ )?(?:(?:[A-Z_][A-Z0-9_]*=\S*) )*"
    r"(?:(?:\S*/)?suli|docker compose run --rm suli-admin)(?= |$)"
)
_FENCE = re.compile(r"^```")
_INLINE = re.compile(r"`((?:\$ )?(?:\.venv/bin/)?suli [^`]+)`")


def doc_commands() -> list[tuple[str, str, bool]]:
    """(where, command, whole) for each suli command line in fenced blocks (whole commands)
    and inline code (prose may name a command without its arguments: `suli index`)."""
    found: list[tuple[str, str, bool]] = []
    for path in DOCS:
        in_block, pending = False, ""
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            where = f"{path.relative_to(ROOT)}:{n}"
            if _FENCE.match(line.strip()):
                in_block = not in_block
                continue
            if in_block:
                text = pending + line.strip()
                if text.endswith("\\"):
                    pending = text[:-1] + " "
                    continue
                pending = ""
                for part in re.split(r"\s*(?:&&|;|\|\|)\s*", text):
                    if _PREFIX.match(part):
                        found.append((where, part, True))
            else:
                found += [(where, m, False) for m in _INLINE.findall(line)]
    return found


def _tokens(command: str) -> list[str]:
    rest = _PREFIX.sub("", command, count=1)
    words = shlex.split(rest, comments=True)
    out = []
    for w in words:
        if w in (">", ">>", "<", "|", "2>", "2>&1"):
            break  # shell redirection or a pipe: the command ends here
        # Synopsis notation: [--json], --method auto|scan|server, PATH ...
        w = w.strip("[]")
        if w in ("", "...", "…") or w.startswith("<"):
            continue
        out.append(w.split("|")[0])
    return out


def _placeholder(word: str) -> bool:
    return word.isupper() or word in ("N",)


def check(command: str, whole: bool = True) -> None:
    """Raise AssertionError when the command would not parse against the CLI."""
    words = _tokens(command)
    cmd: click.Command = cli
    path = ["suli"]
    while True:
        words = _options(cmd, words, path, stop_at_positional=isinstance(cmd, click.Group))
        if not isinstance(cmd, click.Group) or not words:
            break
        name, words = words[0], words[1:]
        sub = cmd.get_command(click.Context(cmd), name)
        assert sub is not None, f"{' '.join(path)}: no command {name!r}"
        cmd, path = sub, [*path, name]
    if isinstance(cmd, click.Group):
        return  # `suli indices` and the like: the group itself, or its --help
    args = [p for p in cmd.params if isinstance(p, click.Argument)]
    most = sum(float("inf") if a.nargs == -1 else a.nargs for a in args)
    assert len(words) <= most, f"{' '.join(path)}: too many arguments {words}"
    fewest = sum(a.nargs for a in args if a.required and a.nargs > 0)
    assert len(words) >= fewest or not whole, f"{' '.join(path)}: missing arguments"


def _options(
    cmd: click.Command, words: list[str], path: list[str], *, stop_at_positional: bool
) -> list[str]:
    """Consume and check options; return the positionals (and, for a group, what follows)."""
    by_name = {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    by_name |= {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.secondary_opts}
    positionals: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("-") and w != "-":
            name, _, attached = w.partition("=")
            if name in ("--help", "--version"):
                i += 1
                continue
            opt = by_name.get(name)
            assert opt is not None, f"{' '.join(path)}: no option {name}"
            if not (opt.is_flag or opt.count) and not attached:
                assert i + 1 < len(words), f"{' '.join(path)}: {name} needs a value"
                value = words[i + 1]
                if isinstance(opt.type, click.Choice) and not _placeholder(value):
                    assert value in opt.type.choices, f"{name} {value}: not one of the choices"
                i += 1
            i += 1
            continue
        if stop_at_positional:
            return words[i:]
        positionals.append(w)
        i += 1
    return positionals


COMMANDS = doc_commands()


def test_docs_have_commands_to_check() -> None:
    assert len(COMMANDS) > 30
    assert any("README.md" in where for where, _, _ in COMMANDS)


@pytest.mark.parametrize(("where", "command", "whole"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_documented_command_parses(where: str, command: str, whole: bool) -> None:
    check(command, whole)


@pytest.mark.parametrize(
    "bad",
    [
        "suli reindex --model all-MiniLM-L6-v2",  # no such option
        "suli token create prn_ana extra",  # too many arguments
        "suli nosuch",
        "suli index",  # FILE missing
        "suli search x --mode fuzzy",  # not a choice
        "suli principal lst",
    ],
)
def test_the_checker_catches_false_docs(bad: str) -> None:
    with pytest.raises(AssertionError):
        check(bad)


RESULTS = ROOT / "bench" / "RESULTS.md"
RAW = ROOT / "bench" / "results"
# A figure: a number with a decimal point (0.3523, 1.15, 87.6); integers are counts and sizes.
_FIGURE = re.compile(r"(?<![\d.])\d+\.\d+(?![\d.])")


def section(text: str, heading: str, end: str) -> str:
    start = text.index(heading)
    return text[start : text.index(end, start + len(heading))]


def test_readme_figures_are_the_results_summary() -> None:
    measured = section((ROOT / "README.md").read_text(), "## Measured", "\n## ")
    summary = section(RESULTS.read_text(), "## Summary", "\n---\n")
    quoted = set(_FIGURE.findall(measured))
    assert {"0.3550", "0.3552"} <= quoted  # the relevance the product ships
    assert quoted <= set(_FIGURE.findall(summary)), quoted - set(_FIGURE.findall(summary))


def test_the_figure_check_catches_a_stale_readme() -> None:
    summary = set(_FIGURE.findall(section(RESULTS.read_text(), "## Summary", "\n---\n")))
    assert "0.3551" not in summary  # measured without the meaning floor: not a current figure
    assert _FIGURE.findall("hybrid **0.3551**, 1.5x, 12 items") == ["0.3551", "1.5"]


@pytest.mark.parametrize("doc", ["RESULTS.md", "RESULTS-archive.md"])
def test_raw_files_named_in_the_results_exist(doc: str) -> None:
    text = (ROOT / "bench" / doc).read_text()
    for name in re.findall(r"bench/results/([\w.{},*-]+\w)", text):
        # `text_leg_{100k,1m}_x.json` and `term-stats-*.txt` name several files.
        alternatives = re.fullmatch(r"(.*)\{(.*)\}(.*)", name)
        names = (
            [alternatives[1] + a + alternatives[3] for a in alternatives[2].split(",")]
            if alternatives
            else [name]
        )
        for n in names:
            assert list(RAW.glob(n)), f"{doc}: bench/results/{n} does not exist"
