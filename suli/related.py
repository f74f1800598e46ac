"""Related items (DESIGN 3.9): the card a search is made from, and its direct references.

An item's card is its title, spec (body) and references; a card with no record is given by the
caller and nothing of it is stored. Its words and meaning are searched like a query, under the
caller's visibility, and the items it references directly (or that reference the item) lead.
"""

from __future__ import annotations

from dataclasses import dataclass

from suli.backends.base import ItemIndex
from suli.errors import InvalidInput
from suli.models import Item
from suli.visibility import Visibility

RELATED_QUERY_WORDS = 64  # a card's title + spec is cut to this many words for the text leg
# ...read from this many leading characters of each: 64 words never need more, and a huge
# body is not split whole just to keep its first words.
RELATED_QUERY_CHARS = 4_000


@dataclass(frozen=True)
class Card:
    """A card with no record: matched from its title and spec; nothing of it is stored."""

    title: str
    spec: str = ""
    references: tuple[str, ...] = ()


def card_of(item: Item) -> Card:
    return Card(item.title, item.body or item.caption, item.references)


def check_card(card: Card) -> None:
    """InvalidInput naming the field of a card that cannot be searched."""
    if not card.title.strip() and not card.spec.strip():
        raise InvalidInput("title: a card needs a title or a spec", "title")
    if any(not r.strip() for r in card.references):
        raise InvalidInput("references: references must be non-empty ids or URLs", "references")


def card_query(card: Card) -> str:
    """The query text of a card: the first words of its title and spec."""
    head = card.title[:RELATED_QUERY_CHARS] + " " + card.spec[:RELATED_QUERY_CHARS]
    return " ".join(head.split()[:RELATED_QUERY_WORDS])


def direct_references(
    index: ItemIndex, vis: Visibility, card: Card, item_id: str | None, limit: int
) -> list[Item]:
    """The visible, unhidden items the card references (in its order, the item itself left
    out), then the visible items that reference the item."""
    refs = [r for r in card.references if r != item_id]
    # get_many returns hidden items too (a direct lookup may name them); related may not.
    found = index.get_many(vis, refs) if refs else {}
    direct = {k: v for k, v in found.items() if not v.hidden}
    out = [direct[r] for r in refs if r in direct]
    if item_id:
        out += [i for i in index.referencing(vis, item_id, limit) if i.id not in direct]
    return out
