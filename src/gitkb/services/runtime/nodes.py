"""Nodes that share one catalog: this node's heartbeat, the writer lease's, and the writer's
change-log compaction.

Every process beats on a thread (``NodeHeartbeat``) every ``lease_seconds / 5``: it records its node
as alive (``nodes`` row), renews the writer lease when it holds it (and stops its writer thread at once
when another node took it over), takes the lease when the holder is gone, and, on a node that is not
the writer, keeps the node's own keyword index current from the change log.

Settings (``[nodes]`` in ``gitkb.toml``): ``lease_seconds`` (10: a dead writer's lease passes to
another node within that time), ``stale_after_seconds`` (900: a node silent for longer stops holding
compaction back, and rebuilds its keyword index from the catalog when it returns).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from gitkb.core.config import Settings
from gitkb.services.context import DEFAULT_LEASE_SECONDS, Context
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.derived.vector_wants import watermark_name
from gitkb.stores import node_rows
from gitkb.stores.catalog import changes, vector_state

log = logging.getLogger("gitkb.nodes")

DEFAULT_STALE_AFTER_SECONDS = 900.0
BEATS_PER_LEASE = 5


def lease_seconds(settings: Settings) -> float:
    return float(settings.section("nodes").get("lease_seconds", DEFAULT_LEASE_SECONDS))


def stale_after_seconds(settings: Settings) -> float:
    return float(settings.section("nodes").get("stale_after_seconds", DEFAULT_STALE_AFTER_SECONDS))


def register(ctx: Context) -> None:
    """Record this node as alive, with the name of its keyword watermark."""
    with ctx.catalog.write() as conn:
        node_rows.beat(
            conn,
            ctx.node_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            home=str(ctx.settings.home),
            keywords_mark=ctx.keywords_mark,
            at=time.time(),
        )


def lost_lease(ctx: Context) -> None:
    """Another node took the lease over: stop running jobs here (the one running goes back to the queue
    at its next step)."""
    log.warning("the writer lease was taken over by another node; this process stops writing")
    writer, ctx.writer = ctx.writer, None
    if writer is not None:
        writer.request_stop()


def beat_once(ctx: Context, take_lease: Callable[[], bool]) -> None:
    register(ctx)
    ctx.record_ef_search()  # the ef_search this node's vector store applied (Context.ef_search_is_new)
    if ctx.lease.held:
        if not ctx.lease.renew():
            lost_lease(ctx)
    elif ctx.lease.looks_free():
        take_lease()
    elif not ctx.keywords_owner:  # the home's owner may have gone: then this process keeps its index
        ctx.lease.guard.try_acquire()
    if (
        not ctx.is_writer
        and ctx.keywords_owner
        and (changes.pending(ctx.catalog.conn, ctx.keywords_mark) > 0 or ctx.keywords.needs_rebuild)
    ):
        catch_up_keywords(ctx)  # this node's own index: another node wrote (or the old layout: rebuilt)


class NodeHeartbeat:
    """The beating thread of one process (started by the composition root)."""

    def __init__(self, ctx: Context, take_lease: Callable[[], bool]) -> None:
        self._ctx = ctx
        self._take_lease = take_lease
        self.every = max(0.05, lease_seconds(ctx.settings) / BEATS_PER_LEASE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gitkb-heartbeat", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                beat_once(self._ctx, self._take_lease)
            except Exception:  # noqa: BLE001 - a failed beat is retried at the next one
                log.exception("node heartbeat")

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


def compact(ctx: Context) -> dict[str, Any]:
    """The writer removes the change-log entries every live node's keyword index and every embedding
    identity in use have applied; returns the floor and how many entries went.

    An identity is in use while some index is bound to it (``index_vectors``), stranded ones included
    (a model change not re-embedded yet: switching back resumes from its watermark). One no index is
    bound to any more (its indexes re-embedded into another identity, or deleted) stops holding the log
    back; an index bound to it again later starts at the head (CREATE_INDEX, or re-embed's
    ``reembed_index`` entry), so it never needs what was compacted."""
    if not ctx.is_writer:
        return {"compacted": False, "floor": None, "removed": 0}
    live_since = time.time() - stale_after_seconds(ctx.settings)
    with ctx.catalog.write() as conn:
        in_use = {b.identity for b in vector_state.bindings(conn).values()}
        counted = [watermark_name(i) for i in sorted(in_use)]  # one not built yet holds it at 0
        floor, removed = node_rows.compact(conn, live_since=live_since, at=time.time(), counted=counted)
    if removed:
        log.info("compacted the change log: %d entries up to seq %d", removed, floor)
    return {"compacted": True, "floor": floor, "removed": removed}


def nodes_view(ctx: Context) -> list[dict[str, Any]]:
    """Every registered node with its keyword watermark and whether it counts as live."""
    conn = ctx.catalog.conn
    live_since = time.time() - stale_after_seconds(ctx.settings)
    marks = changes.watermarks(conn)
    return [
        {
            "node_id": n.id,
            "host": n.host,
            "pid": n.pid,
            "home": n.home,
            "keywords_watermark": marks.get(n.keywords_mark, 0),
            "heartbeat_at": n.heartbeat_at,
            "live": n.heartbeat_at >= live_since,
            "this_node": n.id == ctx.node_id,
        }
        for n in node_rows.list_nodes(conn)
    ]
