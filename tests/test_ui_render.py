"""The web page's pure pieces: diff parsing and pairing, syntax highlighting per line, snippet
marks, footnote links, and what may become a link."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitkb.http.ui.diff import parse_diff
from gitkb.http.ui.render import highlight_lines, link_footnotes, mark_terms, web_url


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def real_diff(tmp_path: Path) -> str:
    """A git diff with an edit, an added file, a deleted file and a rename."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "edit.md").write_text("# Title\n\none\ntwo\nthree\n")
    (repo / "gone.md").write_text("bye\n")
    (repo / "old-name.md").write_text("same text\nover lines\n" * 5)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    (repo / "edit.md").write_text("# Title\n\none\nTWO\n2b\nthree\n")
    (repo / "gone.md").unlink()
    (repo / "new.md").write_text("```python\nx = 1\n```\n")
    (repo / "old-name.md").rename(repo / "new-name.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two")
    return git(repo, "diff", "-M", "HEAD~1", "HEAD")


def test_parse_a_real_git_diff(tmp_path: Path) -> None:
    files = {f.path: f for f in parse_diff(real_diff(tmp_path))}
    assert {p: f.status for p, f in files.items()} == {
        "edit.md": "M",
        "gone.md": "D",
        "new.md": "A",
        "new-name.md": "R",
    }
    assert files["new-name.md"].old_path == "old-name.md" and not files["new-name.md"].hunks
    edit = files["edit.md"]
    assert (edit.added, edit.deleted) == (2, 1)
    lines = edit.hunks[0].lines
    first_del = next(ln for ln in lines if ln.kind == "del")
    assert (first_del.text, first_del.old_no, first_del.new_no) == ("two", 4, None)
    adds = [(ln.text, ln.new_no) for ln in lines if ln.kind == "add"]
    assert adds == [("TWO", 4), ("2b", 5)]
    # side by side: the deletion sits beside the first addition, the second addition alone
    changed = [(a and a.text, b and b.text) for a, b in edit.hunks[0].rows() if a is not b]
    assert changed == [("two", "TWO"), (None, "2b")]
    assert files["gone.md"].deleted == 1 and files["new.md"].added == 3
    assert files["edit.md"].anchor == "diff-edit-md"


def test_diff_lines_are_highlighted_and_escaped() -> None:
    diff = (
        "diff --git a/x.md b/x.md\n--- a/x.md\n+++ b/x.md\n@@ -1,2 +1,2 @@\n"
        " # Heading\n-<script>alert(1)</script>\n+**bold** & <b>\n\\ No newline at end of file\n"
    )
    (f,) = parse_diff(diff)
    htmls = [str(ln.html) for ln in f.hunks[0].lines]
    assert "<script>" not in "".join(htmls) and "&lt;script&gt;" in htmls[1]
    assert "&amp;" in htmls[2] and 'class="' in htmls[0]  # Pygments classes on the heading
    assert f.hunks[0].lines[3].kind == "note"


def test_highlight_lines_keeps_one_entry_per_line() -> None:
    text = "# T\n\n```python\ndef f():\n    return '<x>'\n```\n\nend"
    out = highlight_lines(text, "doc.md")
    assert len(out) == text.count("\n") + 1
    assert "&lt;x&gt;" in "".join(map(str, out))
    assert highlight_lines("a\nb\n", "notes.unknown-ext") == ["a", "b"]
    assert highlight_lines("", "x.md") == []


def test_mark_terms_and_footnotes() -> None:
    marked = str(mark_terms("Rotate the <API> keys; rotation & rotated", "rotate api key"))
    assert marked.count("<mark>") == 5
    assert "&lt;" in marked and "<API>" not in marked
    linked = str(link_footnotes("Keys expire [1] <b>soon</b> [2]"))
    assert '<a href="#fn-1" id="fnref-1">[1]</a>' in linked and "&lt;b&gt;" in linked


def test_only_web_urls_become_links() -> None:
    assert web_url("https://github.com/o/r/pull/1") and web_url("http://127.0.0.1:3000/mr/2")
    for bad in ("javascript:alert(1)", "gitkb+local:/srv/remote.git#change-request-1", "", None):
        assert not web_url(bad)
