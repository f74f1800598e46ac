"""`suli access` on the store, `suli access --url` and GET /api/v1/admin/access give one body."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from cli.main import cli
from suli.auth import create_token
from suli.service import Searcher

from .conftest import Service


def _body(text: str) -> dict[str, Any]:
    body = json.loads(text)
    body.pop("timings_ms", None)
    return dict(body)


@pytest.mark.parametrize(
    ("item", "who", "rule"),
    [
        ("itm_checklist", "prn_ana", "board-group"),  # brd_eng lists grp_eng
        ("itm_secret", "prn_ana", "board-not-listed"),
        ("itm_bobnotes", "prn_ana", "personal-upload"),
        ("itm_rollback", None, None),  # everyone who may see it
    ],
)
def test_the_store_the_cli_over_http_and_the_api_agree(
    core: Searcher, service: Service, item: str, who: str | None, rule: str | None
) -> None:
    admin = create_token(core.backend, "prn_bob", admin=True)
    as_who = ["--as", who] if who else []
    env = service.world.env()
    local = CliRunner().invoke(cli, ["access", item, *as_who, "--json"], env=env)
    assert local.exit_code == 0, local.output
    remote = CliRunner().invoke(
        cli, ["access", item, *as_who, "--json", "--url", service.url, "--token", admin], env=env
    )
    assert remote.exit_code == 0, remote.output
    params = {"item": item, **({"principal": who} if who else {})}
    http = httpx.get(
        f"{service.url}/api/v1/admin/access",
        params=params,
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert http.status_code == 200, http.text
    assert _body(local.stdout) == _body(remote.stdout) == _body(http.text)
    if rule:
        assert _body(http.text)["rule"] == rule
    else:
        assert {v["principal"] for v in _body(http.text)["audience"]} == {
            "prn_ana",
            "prn_bob",
            "prn_bot",
        }
