"""The backend contract, one suite per protocol of suli.backends.base, for any backend.

- DirectoryContract: the Directory protocol (ACLs, principals, token hashes, sessions), driven
  directly; a backend provides the fixture `directory` (a fresh, empty one per test).
- ItemIndexContract: every rule of DESIGN.md sections 2 and 3, through the Searcher over the
  backend's ItemIndex; a backend provides the class-scoped fixture `make_searcher` (see
  helpers.MakeSearcher): each call returns a fresh, isolated World holding the given items,
  principals and ACLs, searchable at once.
- BackendContract: both, for a backend implementing both (the directory from `make_searcher`).

Nothing backend-specific lives here; a backend's "refresh after write" is the World's hook.
"""

from __future__ import annotations

import pytest

from suli.backends.base import Directory
from suli.errors import NotFound
from suli.models import Principal

from .helpers import OTHER_WS, WS, MakeSearcher, acl, principal
from .rules_access import AccessRules
from .rules_answers import AnswerRules
from .rules_binaries import BinaryRules
from .rules_bounded import BoundedWorkRules
from .rules_facet_meaning import FacetMeaningRules
from .rules_facets import FacetRules
from .rules_filters import FilterRules, RegexRules, ResultShapeRules
from .rules_paging import PagingRules
from .rules_property import PropertyRules
from .rules_ranking import FilteredKnnRules, FusionRules, KeepRules, OutcomeRules
from .rules_related import BadInputRules, RelatedRules
from .rules_tenants import ExplainRules, TenantRules
from .rules_typos import TypoRules
from .rules_visibility import AclChangeRules, VisibilityRules

HASH_A, HASH_B = "a" * 64, "b" * 64


class DirectoryRules:
    """What the core reads from a Directory: ACLs by workspace, principals, tokens, sessions."""

    def test_acls_are_read_per_workspace_and_replaced_by_board(self, directory: Directory) -> None:
        directory.put_acls(
            [
                acl("brd_b", ["prn_a"]),
                acl("brd_a", groups=["grp_x"]),
                acl("brd_a", workspace=OTHER_WS),
            ]
        )
        directory.put_acls([acl("brd_b", ["prn_z"])])  # same board, same workspace: replaced
        assert [(a.board, a.members, a.groups) for a in directory.acls(WS)] == [
            ("brd_a", (), ("grp_x",)),
            ("brd_b", ("prn_z",), ()),
        ]
        assert [a.workspace for a in directory.acls(OTHER_WS)] == [OTHER_WS]
        got = directory.acl(WS, "brd_b")
        assert got is not None and got.members == ("prn_z",)
        assert directory.acl(OTHER_WS, "brd_b") is None  # a board id is a key within a workspace
        listed = directory.list_acls()  # every workspace's, by board
        assert [a.board for a in listed] == ["brd_a", "brd_a", "brd_b"]
        assert {(a.board, a.workspace) for a in listed} == {
            ("brd_a", WS), ("brd_a", OTHER_WS), ("brd_b", WS)
        }  # fmt: skip

    def test_principals_are_global_by_id(self, directory: Directory) -> None:
        directory.put_principals([principal("prn_b", "grp_x"), principal("prn_a")])
        assert directory.principal("prn_b") == principal("prn_b", "grp_x")
        assert directory.principal("prn_nobody") is None
        assert [p.id for p in directory.list_principals()] == ["prn_a", "prn_b"]

    def test_a_claim_never_takes_another_workspaces_principal(self, directory: Directory) -> None:
        directory.put_principals([principal("prn_a")])
        assert directory.claim_principal(principal("prn_a", "grp_new")) is True  # same workspace
        assert directory.principal("prn_a") == principal("prn_a", "grp_new")
        assert directory.claim_principal(principal("prn_a", workspace=OTHER_WS)) is False
        assert directory.principal("prn_a") == principal("prn_a", "grp_new")  # nothing written
        assert directory.claim_principal(principal("prn_new", workspace=OTHER_WS)) is True
        assert directory.principal("prn_new") == principal("prn_new", workspace=OTHER_WS)

    def test_a_session_is_the_token_its_principal_and_its_workspaces_acls(
        self, directory: Directory
    ) -> None:
        directory.put_principals([principal("prn_a", "grp_x")])
        directory.put_acls([acl("brd_a", ["prn_a"]), acl("brd_o", workspace=OTHER_WS)])
        directory.put_token(HASH_A, "prn_a", admin=True)
        directory.put_token(HASH_B, "prn_gone", admin=False)
        assert directory.token(HASH_A) == ("prn_a", True)
        s = directory.session(HASH_A)
        assert s is not None and s.admin is True
        assert s.principal == principal("prn_a", "grp_x")
        # A store that reads the ACLs with the token reads its workspace's only (OpenSearch
        # reads none: its searches look up the caller's visibility document themselves).
        assert s.acls is None or [a.board for a in s.acls] == ["brd_a"]
        orphan = directory.session(HASH_B)
        assert orphan is not None and orphan.principal is None and not orphan.acls
        assert directory.session("c" * 64) is None

    def test_tokens_are_listed_by_hash_and_revoked_by_hash(self, directory: Directory) -> None:
        directory.put_principals([principal("prn_a")])
        directory.put_token(HASH_A, "prn_a", admin=False)
        [info] = directory.list_tokens()
        assert (info.hash, info.principal_id, info.admin) == (HASH_A, "prn_a", False)
        assert directory.revoke_token(HASH_A) == 1
        assert directory.token(HASH_A) is None and directory.session(HASH_A) is None
        with pytest.raises(NotFound):
            directory.revoke_token(HASH_A)

    def test_a_stored_visibility_is_the_principals_own(self, directory: Directory) -> None:
        p = Principal("prn_a", WS, groups=("grp_x",))
        directory.put_principals([p])
        vis = directory.stored_visibility(p)
        if vis is not None:  # backends that keep a visibility document: it is this principal's
            assert (vis.workspace, vis.principal_id) == (WS, "prn_a")


class DirectoryContract(DirectoryRules):
    """The Directory suite; subclasses provide `directory` (a fresh, empty directory)."""

    @pytest.fixture
    def directory(self) -> Directory:
        raise NotImplementedError("a backend's contract class provides directory")


class ItemIndexContract(
    VisibilityRules,
    AccessRules,
    AclChangeRules,
    FilteredKnnRules,
    FusionRules,
    OutcomeRules,
    KeepRules,
    FilterRules,
    RegexRules,
    ResultShapeRules,
    RelatedRules,
    BadInputRules,
    PropertyRules,
    TenantRules,
    ExplainRules,
    BoundedWorkRules,
    AnswerRules,
    PagingRules,
    TypoRules,
    FacetRules,
    FacetMeaningRules,
    BinaryRules,
):
    """The search rules over an ItemIndex; subclasses override `make_searcher` (class scope:
    worlds are shared read-only)."""

    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls) -> MakeSearcher:
        raise NotImplementedError("a backend's contract class provides make_searcher")


class BackendContract(ItemIndexContract, DirectoryRules):
    """Both suites for a backend that is both protocols: the directory of an empty world."""

    @pytest.fixture
    def directory(self, make_searcher: MakeSearcher) -> Directory:
        return make_searcher().backend
