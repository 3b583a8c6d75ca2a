"""Word diffs on the review page: the words that changed inside a changed line are marked, in the
unified and the side-by-side view, over the syntax colours; real git diffs and the real page."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from gitkb.http.ui.diff import changed_spans, marked_html, parse_diff
from gitkb.http.ui.render import highlight_lines
from helpers import Upstream
from test_ui_pages import make_client, seed

PARAGRAPH = (
    "API keys for the payments gateway expire every 90 days. Rotate them before they expire: the on-call "
    "engineer of the platform team opens a change in the secrets manager, waits for the gateway to pick "
    "the new version up, and checks the dashboard for failed calls during the following hour."
)
EDITED = (
    PARAGRAPH.replace("every 90 days", "every 60 days")
    .replace("on-call engineer", "duty engineer")
    .replace("following hour", "following day")
)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def prose_diff(tmp_path: Path, old: str, new: str, name: str = "policy.md") -> str:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / name).write_text(f"# Keys\n\n{old}\n\nLast line.\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (repo / name).write_text(f"# Keys\n\n{new}\n\nLast line.\n")
    return git(repo, "diff")


def marks(html: str) -> list[str]:
    return re.findall(r'<mark class="wd">(.*?)</mark>', html)


class Balanced(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ok = True

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ok = self.ok and bool(self.stack) and self.stack.pop() == tag


def balanced(html: str) -> bool:
    p = Balanced()
    p.feed(html)
    return p.ok and not p.stack


def test_a_three_word_change_in_a_long_paragraph_is_marked(tmp_path: Path) -> None:
    (f,) = parse_diff(prose_diff(tmp_path, PARAGRAPH, EDITED))
    lines = f.hunks[0].lines
    old = next(ln for ln in lines if ln.kind == "del")
    new = next(ln for ln in lines if ln.kind == "add")
    assert len(old.text) > 250
    assert marks(str(old.html)) == ["90", "on-call", "hour"]  # "on-call" is one run of word, -, word
    assert marks(str(new.html)) == ["60", "duty", "day"]
    for ln in (old, new):
        assert balanced(str(ln.html))
        text = re.sub(r"<[^>]+>", "", str(ln.html))
        assert text == ln.text  # marks add no characters
    context = [str(ln.html) for ln in lines if ln.kind == "context"]
    assert context and not any("<mark" in h for h in context)


def test_side_by_side_rows_carry_the_same_marks(tmp_path: Path) -> None:
    (f,) = parse_diff(prose_diff(tmp_path, PARAGRAPH, EDITED))
    (pair,) = [(a, b) for a, b in f.hunks[0].rows() if a is not b]
    assert marks(str(pair[0].html)) == ["90", "on-call", "hour"] and marks(str(pair[1].html)) == [
        "60",
        "duty",
        "day",
    ]


def test_lines_that_are_not_an_edit_of_each_other_get_no_marks(tmp_path: Path) -> None:
    (f,) = parse_diff(prose_diff(tmp_path, PARAGRAPH, "Completely unrelated words replaced everything here."))
    assert not any("<mark" in str(ln.html) for h in f.hunks for ln in h.lines)
    assert changed_spans("same", "same") is None
    long_line = "word " * 4000
    assert changed_spans(long_line, long_line + "x") is None  # a minified file: whole lines, fast


def test_marks_sit_inside_syntax_spans_and_escape_html() -> None:
    old = 'Ask the **platform** team <ops@example.com> & "security"'
    new = 'Ask the **payments** team <ops@example.com> & "security"'
    spans = changed_spans(old, new)
    assert spans is not None
    html_old = marked_html(highlight_lines(old + "\n", "x.md")[0], old, spans[0])
    html_new = marked_html(highlight_lines(new + "\n", "x.md")[0], new, spans[1])
    assert marks(str(html_old)) == ["platform"] and marks(str(html_new)) == ["payments"]
    assert 'class="' in str(html_new) and balanced(str(html_new))  # the Markdown colours are kept
    assert "&lt;ops@example.com&gt;" in str(html_new) and "<ops@" not in str(html_new)
    # HTML that does not spell the text: escaped text with marks, never a broken page
    assert str(marked_html(highlight_lines("<b>x</b>\n", "x.md")[0], "<b>y</b>", [(3, 4)])) == (
        '&lt;b&gt;<mark class="wd">y</mark>&lt;/b&gt;'
    )


def test_review_page_marks_changed_words_in_both_views(home: Path, upstream: Upstream) -> None:
    with make_client(home) as c:
        rid = seed(c, upstream.remote)  # "expire every 90 days" -> "expire every 60 days"
        for view in ("unified", "split"):
            page = c.get(f"/ui/reviews/{rid}", params={"view": view}).text
            assert f'class="diff {view}"' in page
            assert '<mark class="wd">90</mark>' in page and '<mark class="wd">60</mark>' in page, view
            assert "every " in page and not re.search(r'<mark class="wd">[^<]*expire', page)
        css = c.get("/ui/static/ui.css")
        assert css.status_code == 200 and "mark.wd" in css.text
