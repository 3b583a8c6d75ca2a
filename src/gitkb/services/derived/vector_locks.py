"""The per-identity catch-up locks of this process, and the catch-up runs going on now (any process).

One catch-up of an identity at a time: ``catch_up_identity`` holds ``identity_lock``; a caller that
must not wait tries them (``try_identity_locks``). ``running_builds`` reads the runs the catalog
records and keeps those whose process is alive.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager

from gitkb.services.context import Context
from gitkb.stores.catalog import vector_outcomes as outcomes
from gitkb.stores.node_lease import pid_alive

_locks_lock = threading.Lock()


def identity_lock(ctx: Context, identity: str) -> threading.RLock:
    with _locks_lock:
        locks = ctx.caches.vector_locks
        return locks.setdefault(identity, threading.RLock())


@contextmanager
def identity_locks(ctx: Context, identities: Iterable[str]) -> Iterator[None]:
    """Hold the catch-up locks of ``identities`` (sorted, so two holders never deadlock)."""
    with ExitStack() as stack:
        for identity in sorted(set(identities)):
            stack.enter_context(identity_lock(ctx, identity))
        yield


def running_builds(ctx: Context) -> list[outcomes.Build]:
    """Catch-up runs going on now (their process is alive): one per identity at most."""
    return [b for b in outcomes.builds(ctx.catalog.conn) if pid_alive(b.pid)]


def try_identity_locks(ctx: Context, identities: Iterable[str]) -> list[threading.RLock] | None:
    """The catch-up locks of ``identities`` if all are free now (the caller releases them), else None."""
    got: list[threading.RLock] = []
    for identity in sorted(set(identities)):
        lock = identity_lock(ctx, identity)
        if not lock.acquire(blocking=False):
            for held in reversed(got):
                held.release()
            return None
        got.append(lock)
    return got
