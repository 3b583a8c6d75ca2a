"""Files a git source skips show up in get_index_status, and clear when they load again."""

from __future__ import annotations

from typing import Any

from helpers import SOURCE, Upstream


def skipped(ws: Any) -> dict[str, str]:
    st = ws.get_index_status()
    assert st["Success"], st
    return {s["path"]: s["category"] for s in st["skipped_files"]}


def test_sync_records_and_clears_skipped_files(source_ws: Any, upstream: Upstream) -> None:
    upstream.write("docs/runbooks/untitled.md", "# No front matter\n\nThe sidecar requires a title.\n")
    upstream.commit_push("add a page without front matter")
    r = source_ws.source_sync(SOURCE)
    assert r["Success"], r
    assert skipped(source_ws) == {"docs/runbooks/untitled.md": "missing_frontmatter"}
    upstream.write("docs/runbooks/untitled.md", "---\ntitle: Titled\n---\n# Titled\n\nNow it loads.\n")
    upstream.commit_push("give it a title")
    assert source_ws.source_sync(SOURCE)["Success"]
    assert skipped(source_ws) == {}
