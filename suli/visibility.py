"""The one visibility rule (DESIGN.md section 2), as data every backend renders into its own filter.

A principal sees an item iff the item is in the principal's workspace and
  - it is workspace-wide (no board, no uploader), or
  - it is on a board whose ACL lists the principal or one of its groups, or
  - it is a personal upload whose uploader is the principal.
The spec is built per query from the current ACLs, so membership changes apply at once; or
(OpenSearch) the engine reads the boards inside the search request itself from the principal's
visibility document, which every ACL and principal write brings up to date before it returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from suli.models import BoardAcl, Item, Principal


@dataclass(frozen=True)
class StoredBoards:
    """Boards not read here: the engine reads them, inside the same request, from the
    principal's visibility document `doc` in `index`, and uses them only if that document was
    made for these `groups` from the ACLs as they are now (else the backend reads the ACLs)."""

    index: str
    doc: str
    groups: frozenset[str]


@dataclass(frozen=True)
class Visibility:
    """What one principal may see right now: `boards`, or (`stored` set) the boards of the
    principal's visibility document, read by the engine within the request."""

    workspace: str
    principal_id: str
    boards: frozenset[str]
    stored: StoredBoards | None = None


def visibility_for(principal: Principal, acls: Iterable[BoardAcl]) -> Visibility:
    """Build the principal's visibility from the current board ACLs of its workspace."""
    groups = set(principal.groups)
    boards = frozenset(
        acl.board
        for acl in acls
        if acl.workspace == principal.workspace
        and (principal.id in acl.members or groups.intersection(acl.groups))
    )
    return Visibility(workspace=principal.workspace, principal_id=principal.id, boards=boards)


# The clause of the rule that lets a principal see an item (`suli access` names it).
Clause = Literal["workspace-wide", "board", "uploader"]


def granting_clause(vis: Visibility, item: Item) -> Clause | None:
    """The rule in Python: which of its clauses lets `vis` see `item`, None when none does.
    Backends render the same rule into their own query language."""
    if vis.stored is not None:
        raise ValueError("boards held by the engine: only that backend can apply them")
    if item.workspace != vis.workspace:
        return None
    if item.board:
        return "board" if item.board in vis.boards else None
    if item.uploader:
        return "uploader" if item.uploader == vis.principal_id else None
    return "workspace-wide"


def can_see(vis: Visibility, item: Item) -> bool:
    """The rule as a yes or no (see granting_clause)."""
    return granting_clause(vis, item) is not None
