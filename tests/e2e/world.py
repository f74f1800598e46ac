"""The e2e tests' workspace: people, an agent, three boards and a dozen items on real OpenSearch.

Who sees what (DESIGN.md section 2):
- prn_ana (person, group grp_eng; member of brd_ops): workspace items, brd_eng, brd_ops;
- prn_bot (agent, member of brd_ops only): workspace items and brd_ops;
- prn_bob (person, member of brd_secret): workspace items, brd_secret, his own upload;
- prn_eve: another workspace; nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.helpers import opener, settings_for

from indexer.pipeline import index_items
from suli.auth import create_token
from suli.models import BoardAcl, Principal
from suli.settings import Settings
from suli.validate import parse_item

WS = "ws_main"
PRINCIPALS = (
    Principal("prn_ana", WS, "person", ("grp_eng",)),
    Principal("prn_bob", WS, "person", ()),
    Principal("prn_bot", WS, "agent", ()),
    Principal("prn_eve", "ws_other", "person", ()),
)
ACLS = (
    BoardAcl("brd_eng", WS, "Engineering", (), ("grp_eng",)),
    BoardAcl("brd_ops", WS, "Operations", ("prn_bot", "prn_ana"), ()),
    BoardAcl("brd_secret", WS, "Secret", ("prn_bob",), ()),
)


def _item(item_id: str, title: str, body: str, day: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": item_id,
        "workspace": WS,
        "title": title,
        "body": body,
        "last_activity_at": f"{day}T12:00:00Z",
        "created_at": f"{day}T09:00:00Z",
        "url": f"https://app.example/items/{item_id}",
        "provenance": {"source": "agentpod", "created_by": fields.pop("by", "prn_ana")},
        **fields,
    }


ITEMS = (
    _item(
        "itm_rollback",
        "Deploy pipeline rollback guide",
        "How to roll back a failed deploy of the pipeline. Revert the release tag, redeploy "
        "the previous build and watch the health dashboards until errors settle.",
        "2026-01-20",
        outcome="approved",
        tags=["deploy", "runbook"],
        stations=[{"id": "st_release", "name": "Release desk"}],
    ),
    _item(
        "itm_checklist",
        "Deploy checklist for database migrations",
        "Run the migration checklist before each deploy: back up, dry-run, then apply.",
        "2026-01-18",
        outcome="completed",
        board="brd_eng",
        agent="prn_bot",
        by="prn_bot",
        references=["itm_rollback", "itm_secret"],
        tags=["deploy", "database"],
    ),
    _item(
        "itm_secret",
        "Secret deploy plan for payroll",
        "Payroll deploy plan, confidential.",
        "2026-01-22",
        outcome="approved",
        board="brd_secret",
        tags=["payroll"],
    ),
    _item(
        "itm_old",
        "Old deploy runbook",
        "The previous deploy runbook, kept for history.",
        "2025-11-02",
        outcome="superseded",
        superseded_by="itm_rollback",
        tags=["deploy", "runbook"],
    ),
    _item(
        "itm_legacy",
        "Legacy deploy script notes",
        "Notes on the legacy deploy shell script.",
        "2025-10-10",
        outcome="superseded",
        superseded_by="itm_secret",
    ),
    _item(
        "itm_alerts",
        "Ops deploy alerts triage",
        "Triage of alerts raised during deploys; the pager rules and who answers.",
        "2026-01-25",
        outcome="in-progress",
        board="brd_ops",
        agent="prn_bot",
        by="prn_bot",
        stations=[{"id": "st_ops", "name": "Ops bay"}],
        tags=["alerts", "deploy"],
    ),
    _item(
        "itm_canary",
        "Canary deploy experiment",
        "Tried canary deploys with five percent of traffic; the rollback was manual and slow.",
        "2026-01-10",
        kind="work-record",
        outcome="failed",
        references=["itm_rollback"],
        tags=["deploy"],
    ),
    _item(
        "itm_onboarding",
        "Onboarding guide for new engineers",
        "Accounts, laptops, the first week and who to ask.",
        "2026-01-05",
        outcome="approved",
        # Many tags: the page must list more than a handful of values per filter.
        tags=["onboarding", "laptops", "accounts", "first-week", "people", "it-setup", "welcome"],
    ),
    _item(
        "itm_bobnotes",
        "Bob's <b>deploy</b> notes & <script>alert('x')</script>",
        "Personal notes about deploy timing <img src=x onerror=alert(1)>.",
        "2026-01-12",
        uploader="prn_bob",
        by="prn_bob",
    ),
    {
        **_item("itm_other", "Deploy guide of another workspace", "Deploy steps.", "2026-01-26"),
        "workspace": "ws_other",
    },
    _item("itm_hidden", "Hidden deploy draft", "A hidden deploy draft.", "2026-01-27", hidden=True),
)

# What each principal may see (by id), to check visibility without trusting the code under test.
VISIBLE = {
    "ana": {
        "itm_rollback",
        "itm_checklist",
        "itm_old",
        "itm_legacy",
        "itm_alerts",
        "itm_canary",
        "itm_onboarding",
    },
    "bot": {"itm_rollback", "itm_old", "itm_legacy", "itm_alerts", "itm_canary", "itm_onboarding"},
    "bob": {
        "itm_rollback",
        "itm_secret",
        "itm_old",
        "itm_legacy",
        "itm_canary",
        "itm_onboarding",
        "itm_bobnotes",
    },
}


@dataclass(frozen=True)
class World:
    settings: Settings
    tokens: dict[str, str]  # ana, bob, bot, eve

    def env(self) -> dict[str, str]:
        """SULI_* variables pointing a `suli` subprocess (or CliRunner) at this world."""
        s = self.settings
        assert s.opensearch_url is not None
        return {
            "SULI_BACKEND": "opensearch",
            "SULI_OPENSEARCH_URL": s.opensearch_url,
            "SULI_INDEX_ALIAS": s.index_alias,
            "SULI_ACL_INDEX": s.acl_index,
            "SULI_EMBEDDER": "fake",
            "SULI_HOME": str(s.home),
        }


def make_world(url: str, name: str, home: Path) -> World:
    """Index the items above into a fresh alias; one token per principal."""
    settings = settings_for(url, name, home)
    searcher = opener()(settings)
    try:
        backend = searcher.backend
        backend.put_principals(PRINCIPALS)
        backend.put_acls(ACLS)
        summary = index_items(
            [(n, parse_item(d)) for n, d in enumerate(ITEMS)], backend, searcher.embedder
        )
        assert summary.indexed == len(ITEMS) and not summary.rejected
        backend.refresh()
        tokens = {p.id.removeprefix("prn_"): create_token(backend, p.id) for p in PRINCIPALS}
    finally:
        searcher.backend.close()
    return World(settings, tokens)
