"""Who may see an item, and why: the admin's "why can't she find it?" (`suli access`).

The answer comes from the one visibility rule (suli.visibility.granting_clause, over the
boards visibility_for builds from the current ACLs), and for one principal the store is asked
too, exactly as a search asks it (Searcher.visibility, then a lookup by id): the explanation
and what searches do cannot drift apart. Reads go through the backend protocols only, so it
works on every backend.

Only for an admin of the item's workspace (or the operator's CLI): callers decide that; an
item of another workspace is looked up nowhere but in the workspace given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from suli.backends.base import Store, as_store
from suli.errors import NotFound
from suli.models import BoardAcl, Item, Principal
from suli.service import Searcher
from suli.validate import lookup_id
from suli.visibility import Visibility, granting_clause, visibility_for

# Why a principal sees an item (the first four) or not (the last four).
Rule = Literal[
    "workspace-wide",
    "board-member",
    "board-group",
    "uploader",
    "board-not-listed",
    "board-without-acl",
    "personal-upload",
    "another-workspace",
]
GRANTS: tuple[Rule, ...] = ("workspace-wide", "board-member", "board-group", "uploader")
# What a search shows of a visible item: "shown", or "hidden" (only when hidden items are
# asked for); "never" for an item the principal may not see.
Shown = Literal["shown", "hidden", "never"]


@dataclass(frozen=True)
class Verdict:
    principal: str
    visible: bool
    rule: Rule
    reason: str  # one line, e.g. "board brd_ops lists group grp_ops, which prn_ana holds"
    groups: tuple[str, ...] = ()  # board-group: the principal's groups the board lists
    hidden: bool = False  # the item's own flag

    @property
    def search(self) -> Shown:
        """What a search by this principal shows of the item."""
        return "never" if not self.visible else "hidden" if self.hidden else "shown"


@dataclass(frozen=True)
class Access:
    """`suli access ITEM --as P`: the verdict, and what P's results say of a replacement."""

    item: Item
    verdict: Verdict
    replacement_visible: bool | None = None  # None: not superseded (or not visible)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Audience:
    """`suli access ITEM`: every principal of the workspace who may see it, by rule."""

    item: Item
    verdicts: tuple[Verdict, ...]  # the visible ones, by rule then principal id
    notes: tuple[str, ...] = ()


def read_item(
    backend: Store,
    workspace: str,
    item_id: str,
    acls: Sequence[BoardAcl],
    principals: Sequence[Principal],
) -> Item | None:
    """The item `item_id` of `workspace` whoever may see it (an admin's view), or None.

    Read by id under visibilities that the protocol's lookup understands: every ACL'd board
    of the workspace at once, then the personal uploads of each principal; only an item no
    principal can see (on a board with no ACL, or uploaded by someone not in the directory)
    costs a walk over the store, and only once the cheap reads found nothing."""
    boards = frozenset(a.board for a in acls if a.workspace == workspace)
    first = principals[0].id if principals else ""
    tries = [Visibility(workspace, first, boards)]
    tries += [Visibility(workspace, p.id, frozenset()) for p in principals[1:]]
    for vis in tries:
        got = backend.get_many(vis, [item_id]).get(item_id)
        if got is not None:
            return got
    if not backend.stored_hashes([(workspace, item_id)]):
        # Not stored: a mistyped id costs no walk. (Every write stores the hash; a store
        # written before hashes existed would answer "no item" here for an unseen item.)
        return None
    for it in backend.all_items():
        if it.workspace == workspace and it.id == item_id:
            return it
    return None


def verdict(item: Item, who: Principal, acls: Sequence[BoardAcl]) -> Verdict:
    """What the rule says of `who` and `item`, and which of its clauses decides it."""
    hidden = item.hidden
    clause = granting_clause(visibility_for(who, acls), item)
    acl = next((a for a in acls if a.workspace == item.workspace and a.board == item.board), None)
    if clause == "workspace-wide":
        return Verdict(
            who.id, True, "workspace-wide", f"workspace-wide in {item.workspace}", (), hidden
        )
    if clause == "uploader":
        return Verdict(who.id, True, "uploader", f"personal upload of {who.id}", (), hidden)
    if clause == "board":
        assert acl is not None  # the rule granted the board through its ACL
        if who.id in acl.members:
            return Verdict(
                who.id, True, "board-member", f"board {acl.board} lists {who.id}", (), hidden
            )
        via = tuple(g for g in who.groups if g in acl.groups)
        held = ", ".join(via)
        word = "group" if len(via) == 1 else "groups"
        return Verdict(
            who.id, True, "board-group",
            f"board {acl.board} lists {word} {held}, which {who.id} holds", via, hidden,
        )  # fmt: skip
    if item.workspace != who.workspace:
        return Verdict(
            who.id, False, "another-workspace",
            f"the item is in workspace {item.workspace}, {who.id} in {who.workspace} "
            "(a search never crosses workspaces)",
        )  # fmt: skip
    if item.board and acl is None:
        return Verdict(
            who.id, False, "board-without-acl",
            f"board {item.board} has no ACL (nobody may see its items)",
        )  # fmt: skip
    if item.board:
        groups = f"any of their groups ({', '.join(who.groups)})" if who.groups else "a group"
        held = "" if who.groups else f" ({who.id} holds none)"
        return Verdict(
            who.id, False, "board-not-listed",
            f"board {item.board} lists neither {who.id} nor {groups}{held}",
        )  # fmt: skip
    return Verdict(who.id, False, "personal-upload", f"personal upload of {item.uploader}")


def explain(searcher: Searcher, workspace: str, item_id: str, who: Principal) -> Access:
    """May `who` see item `item_id` of `workspace`, and why. NotFound when the workspace holds
    no such item (the same answer whatever another workspace holds)."""
    lookup_id(item_id)
    backend = as_store(searcher.backend)
    acls = backend.acls(workspace)
    # `who` first (one read finds what they may see), then the others: a personal upload of
    # someone else is found by its uploader's read, not by a walk over the store.
    others = [p for p in backend.list_principals() if p.id != who.id]
    item = _item(backend, workspace, item_id, acls, [who, *others])
    v = verdict(item, who, acls)
    notes: list[str] = []
    replacement: bool | None = None
    if who.workspace == workspace:
        # Ask the store as a search does: the visibility the searches build, a lookup by id.
        vis = searcher.visibility(who)
        wanted = [item.id, *([item.superseded_by] if item.superseded_by else [])]
        seen = backend.get_many(vis, wanted)
        if (item.id in seen) != v.visible:  # only a write in flight can make them differ
            notes.append(
                f"the store answered {'visible' if item.id in seen else 'not visible'} just "
                "now (an ACL or principal write in flight?): run it again"
            )
        if v.visible and item.superseded_by:
            replacement = item.superseded_by in seen
    return Access(item, v, replacement, tuple(notes))


def audience(searcher: Searcher, workspace: str, item_id: str) -> Audience:
    """Every principal of `workspace` who may see item `item_id`, grouped by rule."""
    lookup_id(item_id)
    backend = as_store(searcher.backend)
    acls = backend.acls(workspace)
    principals = [p for p in backend.list_principals() if p.workspace == workspace]
    item = _item(backend, workspace, item_id, acls, principals)
    verdicts = [verdict(item, p, acls) for p in principals]
    seen = sorted(
        (v for v in verdicts if v.visible), key=lambda v: (GRANTS.index(v.rule), v.principal)
    )
    known = {p.id for p in principals}
    acl = next((a for a in acls if a.board == item.board), None) if item.board else None
    notes = []
    if not seen:  # say why nobody may
        if item.board and acl is None:
            notes.append(f"board {item.board} has no ACL (nobody may see its items)")
        elif item.board:
            notes.append(f"board {item.board} lists no principal of {workspace}, nor their groups")
        elif item.uploader:
            notes.append(f"personal upload of {item.uploader}, not a principal of {workspace}")
    if acl is not None:
        strangers = [m for m in acl.members if m not in known]
        if strangers:
            notes.append(
                f"board {acl.board} also lists {', '.join(strangers)}: not principals of "
                f"{workspace}, so nobody searches as them"
            )
    return Audience(item, tuple(seen), tuple(notes))


def _item(
    backend: Store,
    workspace: str,
    item_id: str,
    acls: Sequence[BoardAcl],
    principals: Sequence[Principal],
) -> Item:
    # Only the workspace's own principals help read it: another's would look elsewhere.
    mine = [p for p in principals if p.workspace == workspace]
    item = read_item(backend, workspace, item_id, acls, mine)
    if item is None:
        raise NotFound(f"no item {item_id!r} in workspace {workspace}")
    return item


# ---- one JSON body for every edge (the CLI's --json is the HTTP answer) -----------------------


def _item_json(item: Item) -> dict[str, Any]:
    return {
        "id": item.id,
        "workspace": item.workspace,
        "title": item.title,
        "scope": item.scope,
        "board": item.board,
        "uploader": item.uploader,
        "hidden": item.hidden,
        "superseded_by": item.superseded_by,
    }


def _verdict_json(v: Verdict) -> dict[str, Any]:
    return {
        "principal": v.principal,
        "visible": v.visible,
        "rule": v.rule,
        "reason": v.reason,
        "groups": list(v.groups),
        "search": v.search,
    }


def access_json(a: Access) -> dict[str, Any]:
    return {
        "item": _item_json(a.item),
        **_verdict_json(a.verdict),
        "replacement_visible": a.replacement_visible,
        "notes": list(a.notes),
    }


def audience_json(a: Audience) -> dict[str, Any]:
    return {
        "item": _item_json(a.item),
        "audience": [_verdict_json(v) for v in a.verdicts],
        "notes": list(a.notes),
    }
