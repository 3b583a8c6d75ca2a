"""ASK's meaning side: cosines of candidate sentences to the question under the embedder of the
first passage's index that has one (``ask_pick`` weighs them beside the words). A failing embedder
is a downgrade the answer says, never a silent one."""

from __future__ import annotations

import math

from gitkb.core.errors import EmbeddingNotConfigured, GitkbError
from gitkb.services.context import Context
from gitkb.services.derived.identity import effective_identity, embedder_for
from gitkb.services.retrieval.ask_pick import Meaning, Passage
from gitkb.services.retrieval.semantic import query_vector, text_vectors
from gitkb.stores.catalog import indexes as index_rows


def meaning_warning(index_name: str, exc: GitkbError) -> str:
    """The warning of an ASK whose sentences lost their meaning score to ``exc``."""
    return (
        f"meaning is unavailable for index {index_name!r} ({exc.code}: {exc.message}); "
        "sentences were chosen by words only"
    )


def meaning_of(
    ctx: Context, query: str, passages: list[Passage], warnings: list[str] | None = None
) -> Meaning | None:
    """Cosines of texts to ``query`` under the embedder of the first passage's index that has one;
    None when none has (keyword-only indexes, no identity configured): sentences go by words alone.

    An index with embeddings whose embedder fails (to build, or to embed the query or the
    sentences) is a downgrade, not a choice: a warning naming the error's code goes to
    ``warnings``, and a failure while embedding the sentences gives cosines of 0 (words only)."""
    for index_id in dict.fromkeys(p.citation["index_id"] for p in passages):
        row = index_rows.get_by_id(ctx.catalog.conn, index_id)
        if row is None or not row.embeddings:
            continue
        try:
            identity = effective_identity(ctx, row)
        except EmbeddingNotConfigured:
            continue  # no identity configured: words alone, by configuration
        try:
            embedder_for(ctx, identity)
            qv = query_vector(ctx, identity, query)
        except GitkbError as exc:
            if warnings is not None:
                warnings.append(meaning_warning(row.name, exc))
            continue
        qn = math.sqrt(sum(x * x for x in qv)) or 1.0

        def cosines(
            texts: list[str],
            identity: str = identity,
            qv: list[float] = qv,
            qn: float = qn,
            name: str = row.name,
        ) -> list[float]:
            try:
                vectors = text_vectors(ctx, identity, texts) if texts else []  # LRU-cached per text
            except GitkbError as exc:
                if warnings is not None:
                    warnings.append(meaning_warning(name, exc))
                return [0.0] * len(texts)
            out = []
            for v in vectors:
                vn = math.sqrt(sum(x * x for x in v)) or 1.0
                out.append(sum(a * b for a, b in zip(qv, v, strict=True)) / (qn * vn))
            return out

        return cosines
    return None
