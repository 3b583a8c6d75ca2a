"""How each chunk a change-log entry asked a vector for got it, per embedding identity.

One row per (identity, seq, cid), written right after the vector is stored (before the
watermark moves), by whichever thread did the work: the background embedder or a caller.
A caller that wrote chunks between change-log seqs ``a`` and ``b`` reads its true counts
here once the watermark passes ``b``. ``how``: ``HAD`` (the chunk already had its vector,
or the entry repeated a chunk), ``EMBEDDED`` (the model made it), ``REUSED`` (copied from a
stored vector of the same text), ``GONE`` (the chunk was deleted before it got one).
Rows are written ``ON CONFLICT DO NOTHING``: redoing an interrupted batch keeps the first answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from gitkb.stores.catalog.engine import Conn

HAD, EMBEDDED, REUSED, GONE = 0, 1, 2, 3
KEEP_SECONDS = 7 * 86400.0


@dataclass
class RangeCounts:
    """Outcomes of the chunks asked for in a seq range (``done`` = rows so far)."""

    embedded: int = 0
    reused: int = 0
    had: int = 0
    gone: int = 0
    texts: int = 0
    tokens: int = 0
    seconds: float = 0.0

    @property
    def done(self) -> int:
        return self.embedded + self.reused + self.had + self.gone


Row = tuple[int, int, int, int, int, float]  # seq, cid, how, texts, tokens, seconds


def record(conn: Conn, identity: str, rows: Iterable[Row]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT INTO vector_outcomes(identity, seq, cid, how, texts, tokens, seconds, at)"
        " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        [(identity, seq, cid, how, texts, tokens, secs, now) for seq, cid, how, texts, tokens, secs in rows],
    )


def counts(
    conn: Conn, identities: Iterable[str], after_seq: int, upto_seq: int, *, since: float = 0.0
) -> RangeCounts:
    """Outcomes recorded for entries ``after_seq < seq <= upto_seq`` in these identities
    (only those recorded at or after ``since``, a time, when given)."""
    out = RangeCounts()
    for identity in sorted(set(identities)):
        for how, n, texts, tokens, secs in conn.execute(
            "SELECT how, COUNT(*), SUM(texts), SUM(tokens), SUM(seconds) FROM vector_outcomes"
            " WHERE identity = ? AND seq > ? AND seq <= ? AND at >= ? GROUP BY how",
            (identity, after_seq, upto_seq, since),
        ):
            n = int(n)
            if how == EMBEDDED:
                out.embedded += n
            elif how == REUSED:
                out.reused += n
            elif how == GONE:
                out.gone += n
            else:
                out.had += n
            out.texts += int(texts or 0)
            out.tokens += int(tokens or 0)
            out.seconds += float(secs or 0.0)
    return out


def prune(conn: Conn, older_than: float | None = None) -> None:
    """Rows are only needed while a caller waits; drop those older than a week."""
    conn.execute("DELETE FROM vector_outcomes WHERE at < ?", (older_than or time.time() - KEEP_SECONDS,))


# -- the vector build running now (one per identity), for status -------------------------------

_BUILD_KEY = "vector_build:"


@dataclass(frozen=True)
class Build:
    identity: str
    from_seq: int  # the watermark when the run started: its work is the entries after it
    pid: int
    started_at: float


def start_build(conn: Conn, identity: str, from_seq: int, pid: int) -> None:
    conn.execute(
        "INSERT INTO workspace_state(key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (_BUILD_KEY + identity, json.dumps({"from_seq": from_seq, "pid": pid}), time.time()),
    )


def end_build(conn: Conn, identity: str) -> None:
    conn.execute("DELETE FROM workspace_state WHERE key = ?", (_BUILD_KEY + identity,))


def builds(conn: Conn) -> list[Build]:
    out = []
    for key, value, at in conn.execute(
        "SELECT key, value, updated_at FROM workspace_state WHERE substr(key, 1, ?) = ? ORDER BY key",
        (len(_BUILD_KEY), _BUILD_KEY),
    ):
        d = json.loads(value or "{}")
        out.append(
            Build(str(key)[len(_BUILD_KEY) :], int(d.get("from_seq", 0)), int(d.get("pid", 0)), float(at))
        )
    return out
