"""Figures of the git-sources issue on the awsdocs corpus (2,757 markdown files) as a git repository.

    .venv/bin/python bench/sync_awsdocs.py [--data ../shared/data/awsdocs/docs] [--proposals 20] [--keep DIR]

Builds a throwaway upstream repository (the corpus under ``docs/``) and a bare
remote, registers it as a source of a fresh workspace (hashing embedder, so
only gitkb's own work is timed), and prints:

* the first sync: wall time, files, chunks;
* after a commit changing one file: ``source sync`` wall time, time until the
  new text is keyword-searchable, the plan used, and the chunks that entered
  the change log as new (what the vector index re-embeds) against the
  chunks of that file and of the whole index; ``build_embeddings`` afterwards
  reports how many chunks it actually embedded, when that method exists;
* ``propose_kb_edit`` latency (search/replace on distinct files, stacked
  proposals): p50, p95, max.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "awsdocs" / "docs"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def ok(out: dict[str, Any]) -> dict[str, Any]:
    if not out.get("Success"):
        sys.exit(f"failed: {out}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--proposals", type=int, default=20)
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = ap.parse_args()
    os.environ.update(
        GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@gitkb.invalid",
        GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@gitkb.invalid", GIT_ALLOW_PROTOCOL="file",
    )  # fmt: skip
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="gitkb-sync-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        run(tmp, args)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path, args: argparse.Namespace) -> None:
    from gitkb import Workspace

    work, remote = tmp / "work", tmp / "remote.git"
    t = time.perf_counter()
    shutil.copytree(args.data, work / "docs")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "awsdocs")
    git(tmp, "clone", "-q", "--bare", str(work), str(remote))
    git(work, "remote", "add", "origin", str(remote))
    files = int(git(work, "ls-files").count("\n") + 1)
    print(f"upstream repository: {files} files ({time.perf_counter() - t:.1f} s to build)")

    ws = Workspace(tmp / "ws", embedding_provider="hashing", embedding_model="hashing-384")
    try:
        ok(ws.source_add("awsdocs", str(remote), documents_root="docs", index="awsdocs"))
        t = time.perf_counter()
        first = ok(ws.source_sync("awsdocs"))
        first_s = time.perf_counter() - t
        total_chunks = first["chunks_added"]
        print(f"first sync: {first_s:.2f} s wall; {first['counts']['added']} documents, {total_chunks} chunks, "
              f"{first['counts']['skipped']} skipped")  # fmt: skip

        if hasattr(ws, "build_embeddings"):
            ok(ws.build_embeddings())  # vectors for everything, so the next count is only the change

        path = sorted(p for p in git(work, "ls-files").splitlines() if p.endswith(".md"))[
            len(first["added"]) // 2
        ]
        target = work / path
        target.write_text(target.read_text() + "\n\nQuokkaMarker: rotate the frobnicator weekly.\n")
        git(work, "commit", "-qam", "one file changed")
        git(work, "push", "-q", "origin", "main")
        file_chunks_before = len(
            ok(ws.document_index("GET_DOCUMENT", index_name="awsdocs", filepath=path))["Chunks"]
        )
        t = time.perf_counter()
        second = ok(ws.source_sync("awsdocs"))
        sync_s = time.perf_counter() - t
        hit = ok(ws.document_index("SEARCH", query="QuokkaMarker frobnicator", index_name="awsdocs", top_n=1))
        searchable_s = time.perf_counter() - t
        assert hit["Results"] and hit["Results"][0]["filepath"] == path, hit
        file_chunks = len(
            ok(ws.document_index("GET_DOCUMENT", index_name="awsdocs", filepath=path))["Chunks"]
        )
        print(f"one-file change ({path}): sync {sync_s:.3f} s wall ({second['plan']} plan, "
              f"{second['took_ms']} ms inside), keyword-searchable after {searchable_s:.3f} s (goal <= 2 s)")  # fmt: skip
        print(f"  chunks re-embedded: {second['chunks_added']} new in the change log "
              f"(the file has {file_chunks} chunks, {file_chunks_before} before; the index {total_chunks}); "
              f"{second['chunks_removed']} removed")  # fmt: skip
        if hasattr(ws, "build_embeddings"):
            emb = ok(ws.build_embeddings())
            print(f"  build_embeddings afterwards embedded {emb.get('chunks_embedded')} chunk(s)")

        md = sorted(p for p in git(work, "ls-files").splitlines() if p.endswith(".md") and p != path)
        picks = md[:: max(1, len(md) // max(1, args.proposals))][: args.proposals]
        lat = []
        for p in picks:
            text = (work / p).read_text()
            words = [w for w in text.split() if len(w) > 6 and text.count(w) == 1]
            rel = p.removeprefix("docs/")
            t = time.perf_counter()
            if words:
                out = ws.propose_kb_edit(
                    "awsdocs", rel, search=words[0], replace=words[0] + "s", note="bench"
                )
            else:
                out = ws.propose_kb_edit("awsdocs", rel, content=text + "\nbench\n", note="bench")
            lat.append((time.perf_counter() - t) * 1000)
            ok(out)
        lat.sort()
        p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
        print(f"propose_kb_edit: {len(lat)} stacked proposals, p50 {statistics.median(lat):.1f} ms, "
              f"p95 {p95:.1f} ms, max {lat[-1]:.1f} ms (goal <= 100 ms)")  # fmt: skip
    finally:
        ws.close()


if __name__ == "__main__":
    main()
