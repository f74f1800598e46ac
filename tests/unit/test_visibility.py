"""The one visibility rule in Python, against hand-made cases and random worlds."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from suli.models import BoardAcl, Item, Principal
from suli.visibility import can_see, visibility_for

ANA = Principal("prn_ana", "ws1", groups=("grp_eng",))
ACLS = [
    BoardAcl("brd_a", "ws1", members=("prn_ana",)),
    BoardAcl("brd_g", "ws1", groups=("grp_eng",)),
    BoardAcl("brd_x", "ws1", members=("prn_bob",)),
    BoardAcl("brd_o", "ws2", members=("prn_ana",)),  # same person id, other workspace
]


@pytest.mark.parametrize(
    ("item", "visible"),
    [
        (Item("1", "ws1", "t"), True),
        (Item("2", "ws2", "t"), False),
        (Item("3", "ws1", "t", board="brd_a"), True),
        (Item("4", "ws1", "t", board="brd_g"), True),
        (Item("5", "ws1", "t", board="brd_x"), False),
        (Item("6", "ws1", "t", board="brd_o"), False),
        (Item("7", "ws1", "t", uploader="prn_ana"), True),
        (Item("8", "ws1", "t", uploader="prn_bob"), False),
        (Item("9", "ws2", "t", uploader="prn_ana"), False),
    ],
)
def test_rule(item: Item, visible: bool) -> None:
    assert can_see(visibility_for(ANA, ACLS), item) is visible


def test_membership_change_applies_to_next_spec() -> None:
    before = visibility_for(ANA, ACLS)
    after = visibility_for(
        ANA, [*ACLS[:2], BoardAcl("brd_x", "ws1", members=("prn_bob", "prn_ana"))]
    )
    item = Item("5", "ws1", "t", board="brd_x")
    assert not can_see(before, item) and can_see(after, item)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["b1", "b2", "b3"]),
            st.sets(st.sampled_from(["p1", "p2"])),
            st.sets(st.sampled_from(["g1", "g2"])),
            st.sampled_from(["ws", "other"]),
        ),
        max_size=4,
    ),
    st.sampled_from(["p1", "p2"]),
    st.sets(st.sampled_from(["g1", "g2"])),
)
def test_board_visible_iff_listed(acl_spec, pid, groups) -> None:
    acls = [BoardAcl(b, ws, members=tuple(m), groups=tuple(g)) for b, m, g, ws in acl_spec]
    vis = visibility_for(Principal(pid, "ws", groups=tuple(groups)), acls)
    for b in ("b1", "b2", "b3"):
        listed = any(
            a.board == b
            and a.workspace == "ws"
            and (pid in a.members or set(groups) & set(a.groups))
            for a in acls
        )
        assert (b in vis.boards) is bool(listed)
        assert can_see(vis, Item("i", "ws", "t", board=b)) is bool(listed)
