"""The reference of every SULI_* variable, drawn from the Settings model, and typo detection.

`suli config` prints it, docs/settings.md carries the same table (a test keeps the two equal),
and an unknown SULI_* variable in the environment is reported with the closest known name:
a mistyped `SULI_OPENSEARCH_URLS` would otherwise be ignored and the embedded store used.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from suli.settings import Settings

PREFIX = "SULI_"
MASK = "********"

# Variables read outside Settings: by CLI options (Click envvar=), devcluster, and the tests, CI
# and benchmarks. Known, so they are not reported as typos.
OTHER_VARIABLES = {
    "SULI_URL": "`suli` remote mode: the query service's base URL (instead of a local backend)",
    "SULI_TOKEN": "`suli` remote mode: the bearer token sent to SULI_URL",
    "SULI_PRINCIPAL": "the principal that search, related, show and facets act as (--as)",
    "SULI_DEMO_PORT": "`suli demo`: the port of the demo's server",
    "SULI_CLUSTER_DIR": "devcluster: node homes, pids and logs (default ~/.cache/suli/cluster)",
    "SULI_CLUSTER_CACHE": "devcluster: the OpenSearch artifact cache (default ~/.cache/suli/...)",
    "SULI_CLUSTER_VERSION": "devcluster: the OpenSearch version `suli cluster up` runs",
    "SULI_JAVA_HOME": "devcluster: the JDK the nodes run on (else JAVA_HOME, else the newest)",
}
# Prefixes of variables that belong to the test suite, CI and the benchmarks.
DEV_PREFIXES = (
    "SULI_TEST_",
    "SULI_CI_",
    "SULI_FUZZ_",
    "SULI_PROPERTY_",
    "SULI_MUTANT",
    "SULI_NFCORPUS",
    "SULI_CHROMIUM",
    "SULI_BENCH_",
)


@dataclass(frozen=True)
class Variable:
    """One row of the reference."""

    name: str
    type: str
    default: str
    secret: bool


def _type_name(annotation: Any) -> str:
    """`int | None`, `embedded | opensearch`, `dict[str, float]`: how a person would write it."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    return "None" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, Path):
            return str(value).replace(str(Path.home()), "~", 1)
    elif field.default is PydanticUndefined or field.default is None:
        return ""
    else:
        value = field.default
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value.value if hasattr(value, "value") else value)


def variables() -> list[Variable]:
    """Every Settings field as its environment variable, in the model's order."""
    rows = []
    for name, field in Settings.model_fields.items():
        rows.append(
            Variable(
                name=PREFIX + name.upper(),
                type=_type_name(field.annotation),
                default=_default(field),
                secret=_is_secret(field.annotation),
            )
        )
    return rows


def current_values(settings: Settings) -> dict[str, str]:
    """Each variable's value as the process sees it, secrets masked."""
    out = {}
    for row, name in zip(variables(), Settings.model_fields, strict=True):
        value = getattr(settings, name)
        if value is None:
            out[row.name] = ""
        elif row.secret:
            out[row.name] = MASK
        elif isinstance(value, dict | list):
            out[row.name] = json.dumps(value, separators=(",", ":"))
        else:
            out[row.name] = str(value)
    return out


def known_names() -> set[str]:
    return {v.name for v in variables()} | set(OTHER_VARIABLES)


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """(name, closest known name or None) for each SULI_* variable nobody reads."""
    env = os.environ if environ is None else environ
    known = known_names()
    out = []
    for name in sorted(env):
        if not name.startswith(PREFIX) or name in known or name.startswith(DEV_PREFIXES):
            continue
        head = name.split("__", 1)[0]  # nested: SULI_OUTCOME_WEIGHTS__FAILED
        if "__" in name and head in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        out.append((name, close[0] if close else None))
    return out


def unknown_lines(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning line per unknown SULI_* variable."""
    lines = []
    for name, close in unknown_variables(environ):
        hint = f"; did you mean {close}?" if close else "; `suli config` lists every setting"
        lines.append(f"warning: {name} is not a Suli setting and is ignored{hint}")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(rows: Iterable[Variable], what: Mapping[str, str]) -> str:
    """The reference as the Markdown table docs/settings.md carries; `what` is the prose column."""
    lines = ["| variable | type | default | what |", "|---|---|---|---|"]
    for v in rows:
        default = f"`{v.default}`" if v.default else ""
        lines.append(
            f"| `{v.name}` | {_cell(v.type)} | {_cell(default)} | {what.get(v.name, '')} |"
        )
    return "\n".join(lines) + "\n"
