"""What ``verify`` reports: one ``Difference`` per kind of disagreement between the catalog and a
derived store, with a sample of the ids and what repair needs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

SAMPLE = 10  # ids shown per difference


@dataclass
class Difference:
    kind: str
    store: str  # "keywords", "vectors:<identity>", "clones", "watermarks"
    count: int
    detail: str
    sample: list[str] = field(default_factory=list)
    repairable: bool = True
    # what repair needs (cids, ids, index ids, source ids); not part of the answer
    items: list[Any] = field(default_factory=list, repr=False)
    index_ids: list[str] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("items")
        d.pop("index_ids")
        return d


def difference(kind: str, store: str, items: Iterable[Any], detail: str, **kw: Any) -> Difference | None:
    got = sorted(items, key=str)
    if not got:
        return None
    return Difference(kind, store, len(got), detail, [str(i) for i in got[:SAMPLE]], items=got, **kw)
