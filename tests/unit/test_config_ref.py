"""The settings reference: docs/settings.md equals the model, secrets are masked, typos named."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from pydantic import SecretStr

from cli.main import cli
from suli.config_ref import MASK, current_values, unknown_lines, unknown_variables, variables
from suli.settings import Settings

DOC = Path(__file__).parents[2] / "docs" / "settings.md"
ROW = re.compile(r"^\| `(SULI_[A-Z0-9_]+)` \| (.*?) \| (.*?) \| (.*) \|$")


def _doc_rows() -> dict[str, tuple[str, str, str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            name, typ, default, what = m.groups()
            rows[name] = (typ.replace("\\|", "|"), default.strip("`").replace("\\|", "|"), what)
    return rows


def test_the_docs_table_lists_every_setting_with_its_type_and_default() -> None:
    documented = _doc_rows()
    model = {v.name: (v.type, v.default) for v in variables()}
    assert set(documented) == set(model), (
        f"missing in docs/settings.md: {sorted(set(model) - set(documented))}; "
        f"no such setting: {sorted(set(documented) - set(model))}"
    )
    for name, (typ, default, what) in documented.items():
        assert (typ, default) == model[name], name
        assert what.strip(), f"{name} has no description in docs/settings.md"


def test_every_settings_field_is_a_row() -> None:
    assert [v.name for v in variables()] == [f"SULI_{n.upper()}" for n in Settings.model_fields]


def test_secrets_are_masked_and_other_values_shown() -> None:
    s = Settings(opensearch_password=SecretStr("hunter2"), rrf_k=42, backend="embedded")
    values = current_values(s)
    assert values["SULI_OPENSEARCH_PASSWORD"] == MASK
    assert values["SULI_RRF_K"] == "42"
    assert "hunter2" not in json.dumps(values)


def test_a_mistyped_variable_is_named_with_the_closest_setting() -> None:
    env = {
        "SULI_OPENSEARCH_URLS": "http://x",
        "SULI_RRF_K": "60",  # known
        "SULI_OUTCOME_WEIGHTS__FAILED": "0.1",  # nested form of a known one
        "SULI_TEST_OPENSEARCH_URL": "x",  # the test suite's own
        "SULI_TOKEN": "t",  # read by a CLI option
        "PATH": "/bin",
    }
    assert unknown_variables(env) == [("SULI_OPENSEARCH_URLS", "SULI_OPENSEARCH_URL")]
    assert unknown_lines({"SULI_QQQQQQQQQQQQQQQQQQQ": "1"}) == [
        "warning: SULI_QQQQQQQQQQQQQQQQQQQ is not a Suli setting and is ignored; "
        "`suli config` lists every setting"
    ]


def test_the_cli_warns_on_stderr_and_keeps_json_stdout_clean(tmp_path: Path) -> None:
    env = {"SULI_OPENSEARCH_URLS": "http://x", "SULI_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["schema", "item"], env=env)
    assert result.exit_code == 0, result.output
    assert "did you mean SULI_OPENSEARCH_URL?" in result.stderr
    json.loads(result.stdout)  # stdout is the schema alone


def test_suli_config_json_lists_settings_with_masked_secrets(tmp_path: Path) -> None:
    env = {"SULI_OPENSEARCH_PASSWORD": "hunter2", "SULI_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["config", "--json"], env=env)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    by_name = {row["name"]: row for row in body["settings"]}
    assert by_name["SULI_OPENSEARCH_PASSWORD"]["current"] == MASK
    assert by_name["SULI_RRF_K"] == {
        "name": "SULI_RRF_K",
        "type": "int",
        "default": "60",
        "current": "60",
    }
    assert "hunter2" not in result.output
