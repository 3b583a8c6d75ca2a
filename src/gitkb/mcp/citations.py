"""The compact citation page an agent reads: every citation field, each long value once.

One shape for every MCP tool that returns search hits (``search_index``, and
``document_index`` with ``SEARCH``). The library and HTTP answers
(``gitkb.services.dispatch.scoped_search.search_index``, ``SEARCH``) repeat per
result the index id and name, the document's path, id and title and a
``source_uri`` whose prefix (``git+<remote>@<commit>:``) is the same for every
document of an index. On the MCP page those go into two tables and each result
is one row (the shape is the tools' documented output: their descriptions spell
it, once per session instead of once per page)::

    {"Success": true, "mode": "hybrid",
     "indexes": [["kidx_...", "handbook", "git+...@<sha>:"]],
     "documents": [[0, "docs/runbooks/database-failover.md", "Database failover"]],
     "Results": [["kchk_...", 0, [1, 17], 0.8123, "... the replica is promoted ..."]]}

An ``indexes`` row is ``[index_id, index_name, source_uri_prefix]`` (the prefix
left out when no hit has one; ``index_id`` null for a searched index that gave
no hit and whose id the answer does not carry). A ``Results`` row is ``[id,
document, location, score, snippet]``: ``document`` is a position in
``documents``, whose rows are ``[index, filepath, document_title]`` plus, when
it is not the index's ``source_uri_prefix`` + ``filepath``, the document's
``source_uri`` (a string, or null for none); ``index`` is a position in
``indexes``; ``location`` is ``[line_start, line_end]``. Left out as derivable:
``action``, ``query`` and ``top_n`` (the request), ``count`` and
``Message`` (the length of ``Results``), ``file_id`` (GET_DOCUMENT takes
``index_name`` + ``filepath``), ``next_steps`` (in the tool's description),
``ignored`` when empty; and the per-hit ``retrievers``, ``heading_path``,
``char_start``/``char_end`` and the answer's ``took_ms``. Scores are rounded to
4 decimals. ``expand`` gives back the per-result citations (``parse_block``
applies it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

_NEEDED = ("id", "index_id", "filepath", "source_uri", "location", "snippet", "score")


def compactable(data: dict[str, Any]) -> bool:
    results = data.get("Results")
    return (
        bool(data.get("Success"))
        and isinstance(results, list)
        and isinstance(data.get("indexes"), list)
        and all(isinstance(r, dict) and all(k in r for k in _NEEDED) for r in results)
    )


def _prefix(uri: Any, path: str) -> str | None:
    if isinstance(uri, str) and path and uri.endswith(path) and len(uri) > len(path):
        return uri[: -len(path)]
    return None


def _index_rows(data: dict[str, Any]) -> list[list[Any]]:
    """``[index_id, index_name]`` per searched index: the answer's ``indexes`` are
    ``{index_id, index_name}`` (search_index) or names (SEARCH, ids read off the hits)."""
    ids = {r.get("index_name"): r["index_id"] for r in data["Results"]}
    rows: list[list[Any]] = []
    for i in data["indexes"]:
        if isinstance(i, dict):
            rows.append([i.get("index_id"), i.get("index_name")])
        else:
            rows.append([ids.get(i), i])
    return rows


def compact(data: dict[str, Any]) -> dict[str, Any]:
    """The compact page for a search answer (unchanged when it is not one)."""
    if not compactable(data):
        return data
    results: list[dict[str, Any]] = data["Results"]
    indexes = _index_rows(data)
    pos = {row[0]: n for n, row in enumerate(indexes) if row[0] is not None}
    for r in results:  # a hit from an index the envelope does not list (not expected): list it
        if r["index_id"] not in pos:
            pos[r["index_id"]] = len(indexes)
            indexes.append([r["index_id"], r.get("index_name")])
    prefixes: dict[str, Counter[str]] = {}
    for r in results:
        p = _prefix(r["source_uri"], r["filepath"])
        if p is not None:
            prefixes.setdefault(r["index_id"], Counter())[p] += 1
    for iid, counts in prefixes.items():
        indexes[pos[iid]].append(counts.most_common(1)[0][0])
    documents: list[list[Any]] = []
    doc_pos: dict[tuple[str, str], int] = {}
    rows: list[list[Any]] = []
    for r in results:
        key = (r["index_id"], r["filepath"])
        if key not in doc_pos:
            ix = pos[r["index_id"]]
            row: list[Any] = [ix, r["filepath"], r.get("document_title")]
            prefix = _row_prefix(indexes[ix])
            if r["source_uri"] != (prefix + r["filepath"] if prefix is not None else None):
                row.append(r["source_uri"])
            doc_pos[key] = len(documents)
            documents.append(row)
        loc = r.get("location") or {}
        score = r.get("score")
        rows.append(
            [
                r["id"],
                doc_pos[key],
                [loc.get("line_start"), loc.get("line_end")],
                round(score, 4) if isinstance(score, float) else score,
                r.get("snippet"),
            ]
        )
    out: dict[str, Any] = {"Success": True, "mode": data.get("mode"), "indexes": indexes}
    if data.get("ignored"):
        out["ignored"] = data["ignored"]
    out["documents"] = documents
    out["Results"] = rows
    if data.get("Warnings"):
        out["Warnings"] = data["Warnings"]
    return out


def _row_prefix(row: list[Any]) -> str | None:
    return row[2] if len(row) > 2 else None


def is_compact(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("indexes"), list)
        and all(isinstance(i, list) for i in body["indexes"])
        and isinstance(body.get("documents"), list)
        and isinstance(body.get("Results"), list)
        and all(isinstance(r, list) and len(r) == 5 for r in body["Results"])
    )


def expand(body: dict[str, Any]) -> dict[str, Any]:
    """Per-result citations again (``id``, ``index_id``, ``index_name``, ``filepath``,
    ``document_title``, ``source_uri``, ``location``, ``snippet``, ``score``) from a compact page."""
    indexes = body["indexes"]
    results = []
    for cid, d, (line_start, line_end), score, snippet in body["Results"]:
        doc = body["documents"][d]
        ix = indexes[doc[0]]
        prefix = _row_prefix(ix)
        uri = doc[3] if len(doc) > 3 else (prefix + doc[1] if prefix is not None else None)
        results.append(
            {
                "id": cid,
                "index_id": ix[0],
                "index_name": ix[1],
                "filepath": doc[1],
                "document_title": doc[2],
                "source_uri": uri,
                "location": {"line_start": line_start, "line_end": line_end},
                "snippet": snippet,
                "score": score,
            }
        )
    out = {k: v for k, v in body.items() if k not in ("documents", "indexes", "Results")}
    out["indexes"] = [{"index_id": i[0], "index_name": i[1]} for i in indexes]
    out.setdefault("ignored", [])
    out["Results"] = results
    out["count"] = len(results)
    return out
