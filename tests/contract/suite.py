"""BackendContract: every rule of DESIGN.md sections 2 and 3, for any backend.

A backend's test module subclasses BackendContract and provides the class-scoped fixture
`make_searcher` (see helpers.MakeSearcher): each call returns a fresh, isolated World holding
the given items, principals and ACLs, searchable at once. Nothing backend-specific lives here;
a backend's "refresh after write" is the World's `refresh` hook.
"""

from __future__ import annotations

import pytest

from .helpers import MakeSearcher
from .rules_answers import AnswerRules
from .rules_bounded import BoundedWorkRules
from .rules_filters import FilterRules, RegexRules, ResultShapeRules
from .rules_property import PropertyRules
from .rules_ranking import FilteredKnnRules, FusionRules, KeepRules, OutcomeRules
from .rules_related import BadInputRules, RelatedRules
from .rules_tenants import ExplainRules, TenantRules
from .rules_visibility import AclChangeRules, VisibilityRules


class BackendContract(
    VisibilityRules,
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
):
    """The shared suite; subclasses override `make_searcher` (class scope: worlds are shared read-only)."""

    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls) -> MakeSearcher:
        raise NotImplementedError("a backend's contract class provides make_searcher")
