"""Waiting for the vectors of a range of the change log: a write that asked for ``wait_for_vectors``.

The writer embeds here, in the caller's thread; any other process asks the lease holder to finish
(a ``build_embeddings`` job) and reads the outcome from the catalog.
"""

from __future__ import annotations

from typing import Any

from gitkb.services.context import Context
from gitkb.services.derived.embeddings import locks_reporting, range_reporter
from gitkb.services.derived.vector_counts import range_vectors
from gitkb.services.derived.vector_wants import asks_in_range
from gitkb.services.derived.vectors_catchup import Progress, catch_up_identity
from gitkb.services.runtime import jobs


def wait_for_range(
    ctx: Context, after_seq: int, upto_seq: int, progress: Progress | None = None
) -> dict[str, Any]:
    """Block until the chunks of that range have their vectors (this thread does what the background
    embedder has not done yet); returns ``range_vectors``'s answer."""
    asks = asks_in_range(ctx, after_seq, upto_seq)
    if not asks:
        return {}
    report = range_reporter(ctx, dict.fromkeys(asks, after_seq), progress)
    report.total = sum(asks.values())
    if ctx.is_writer:
        held = locks_reporting(ctx, list(asks), report)
        try:
            for ident in sorted(asks):
                catch_up_identity(ctx, ident, progress=lambda _d, _t: report())
        finally:
            for lock in reversed(held):
                lock.release()
    else:  # the lease holder embeds: ask it to finish, as build_embeddings does
        jobs.run_inline(ctx, "build_embeddings", {})
    report.at = 0.0
    report()
    return range_vectors(ctx, after_seq, upto_seq)
