"""The visibility document's pure parts: the lookup clause and when a stored document is used."""

from __future__ import annotations

from typing import Any

import pytest

from suli.backends.opensearch import visdocs as vd
from suli.backends.opensearch.bodies import visibility_clause
from suli.models import BoardAcl, Principal
from suli.visibility import Visibility, can_see

ANA = Principal("prn_ana", "ws", groups=("grp_eng",))
ACLS = [(BoardAcl("brd_a", "ws", "A", ("prn_ana",)), 7), (BoardAcl("brd_e", "ws", "E", (), ("grp_eng",)), 9), (BoardAcl("brd_x", "ws", "X"), 11)]  # fmt: skip
VIS = vd.stored("acl-idx", ANA)


def check(doc: dict[str, Any] | None, count: int = 4, seq_sum: int = 3 + 7 + 9 + 11) -> Any:
    """A check response: the document (if any) and the state's stamp now."""
    hits = [{"_id": vd.doc_id("prn_ana"), "_source": doc}] if doc else []
    state = {"doc_count": count, "seq": {"value": float(seq_sum)}}
    return {"hits": {"hits": hits}, "aggregations": {"all": {"state": state}}}


def test_built_document_is_used_while_the_state_is_the_one_it_came_from() -> None:
    doc = vd.build(ANA, 3, ACLS)
    assert doc["board"] == ["brd_a", "brd_e"] and (doc["seen_count"], doc["seen_seq_sum"]) == (
        4,
        30,
    )
    got = vd.resolved(VIS, check(doc))
    assert got == Visibility("ws", "prn_ana", frozenset({"brd_a", "brd_e"}))


@pytest.mark.parametrize(
    "response",
    [
        check(None),  # missing: an older index or a principal of before
        check(vd.build(ANA, 3, ACLS), count=3),  # an ACL deleted since
        check(vd.build(ANA, 3, ACLS), seq_sum=31),  # an ACL or the principal written since
        check({**vd.build(ANA, 3, ACLS), "workspace": "ws_other"}),
        check({**vd.build(ANA, 3, ACLS), "groups": []}),  # made for other groups
        {"error": {"type": "index_not_found_exception"}, "status": 404},
    ],
)
def test_any_other_document_or_a_failed_check_is_not_used(response: Any) -> None:
    assert vd.resolved(VIS, response) is None  # the backend reads the ACLs instead


def test_the_boards_clause_is_a_terms_lookup_on_the_principals_document() -> None:
    clause = visibility_clause(VIS)
    lookup = {"index": "acl-idx", "id": "vis:prn_ana", "path": "board"}
    assert {"terms": {"board": lookup}} in clause["bool"]["should"]
    assert clause["bool"]["filter"] == [{"term": {"workspace": "ws"}}]
    with pytest.raises(ValueError):
        can_see(VIS, None)  # type: ignore[arg-type]  # only the engine knows these boards


# ---- the token's copy ------------------------------------------------------------------------

BY_TOKEN = vd.by_token("acl-idx", "h" * 64)
TOKEN = {"doc_type": "token", "principal_id": "prn_ana", "workspace": "ws", "admin": False}
OWNER = {"hits": {"hits": [{"_source": {"doc_type": "principal", "principal_id": "prn_ana",
         "workspace": "ws", "groups": ["grp_eng"]}}]}}  # fmt: skip


def test_a_search_by_token_looks_everything_up_in_the_token_document() -> None:
    clause = visibility_clause(BY_TOKEN)

    def on_token(path: str) -> dict[str, str]:
        return {"index": "acl-idx", "id": "token:" + "h" * 64, "path": path}

    assert clause["bool"]["filter"] == [{"terms": {"workspace": on_token("workspace")}}]
    should = clause["bool"]["should"]
    assert {"terms": {"board": on_token("board")}} in should
    mine = {"terms": {"uploader": on_token("principal_id")}}
    assert {"bool": {"filter": [{"term": {"scope": "personal"}}, mine]}} in should
    assert "ws" not in str(clause) and "prn_ana" not in str(clause)  # nothing known here


def test_the_tokens_copy_is_used_only_while_current() -> None:
    doc = {**TOKEN, **vd.token_fields(vd.build(ANA, 3, ACLS))}
    got = vd.token_resolved(check(doc), OWNER)
    assert got.vis == Visibility("ws", "prn_ana", frozenset({"brd_a", "brd_e"}))
    assert got.principal == ANA and got.token == doc
    for stale in (
        check(doc, seq_sum=31),  # an ACL or the principal written since
        check(doc, count=3),  # an ACL deleted since
        check({**doc, "groups": []}),  # made for other groups
        check({**doc, "workspace": "ws_other"}),  # the principal moved since
        check(TOKEN),  # a token of an older Suli: no copy at all
    ):
        answer = vd.token_resolved(stale, OWNER)
        assert answer.vis is None and answer.principal == ANA  # the ACLs are read instead
    assert vd.token_resolved(check(None), OWNER) == vd.TokenAnswer(None, None, None)
    gone = vd.token_resolved(check(doc), {"hits": {"hits": []}})
    assert gone.token == doc and gone.principal is None and gone.vis is None
