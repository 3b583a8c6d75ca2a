from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitkb.core.errors import InvalidArgument
from gitkb.core.paths import SIDECAR_NAMES, normalize_proposal_path

ROOT = "docs"


def norm(p: str, root: str = ROOT) -> str:
    return normalize_proposal_path(p, documents_root=root)


@pytest.mark.parametrize(
    ("given_path", "expected"),
    [
        ("edw/guide.md", "docs/edw/guide.md"),
        ("docs/edw/guide.md", "docs/edw/guide.md"),
        ("edw\\guide.md", "docs/edw/guide.md"),
        ("./edw/./guide.md", "docs/edw/guide.md"),
        ("edw/sub/deeper/page.MD", "docs/edw/sub/deeper/page.MD"),
        ("edw/../ops/runbook.yaml", "docs/ops/runbook.yaml"),
        ("docs/edw/../ops/x.json", "docs/ops/x.json"),
        ("kb-manifest.json", "docs/kb-manifest.json"),
        ("docs/gitkb.yml", "docs/gitkb.yml"),
        ("edw/100%.txt", "docs/edw/100%.txt"),
        ("edw/a%41b.csv", "docs/edw/a%41b.csv"),  # kept literally: decoding does not change the shape
        ("edw/café.md", "docs/edw/café.md"),
        ("docs/docs/x.md", "docs/docs/x.md"),
        (".github/x.md", "docs/.github/x.md"),
    ],
)
def test_accepted_paths_normalise_idempotently(given_path: str, expected: str) -> None:
    assert norm(given_path) == expected
    assert norm(expected) == expected  # idempotent


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/etc/passwd.md", "absolute"),
        ("/docs/edw/x.md", "absolute"),
        ("\\\\server\\share\\x.md", "absolute"),
        ("C:/docs/edw/x.md", "drive"),
        ("c:edw/x.md", "drive"),
        ("edw/x.md:stream", "drive"),
        ("..\\..\\etc\\x.md", "escape"),
        ("../README.md", "escape"),
        ("edw/../../README.md", "escape"),
        ("docs/../edw/x.md", "escape"),
        ("DOCS/../../x.md", "case"),
        ("Docs/edw/x.md", "case"),
        ("edw/..%2f..%2fx.md", "encoded"),
        ("%2e%2e/%2e%2e/x.md", "encoded"),
        ("edw/%252e%252e/%252e%252e/x.md", "encoded"),
        ("edw/a%2fb.md", "encoded"),
        ("edw/a%5cb.md", "encoded"),
        ("edw/x%00.md", "encoded"),
        ("edw/\uff0e\uff0e/x.md", "unicode_lookalike"),
        ("edw\uff0fx.md", "unicode_lookalike"),
        ("edw/x\x00.md", "control_character"),
        ("edw/x\n.md", "control_character"),
        ("edw/\u202ex.md", "control_character"),
        ("edw//x.md", "empty_segment"),
        ("edw/x.md/", "empty_segment"),
        (".git/config.md", "git_dir"),
        ("edw/.GIT/x.md", "git_dir"),
        ("edw/.git./x.md", "git_dir"),
        ("edw/GIT~1/x.md", "git_dir"),
        ("edw./x.md", "segment_edge"),
        ("edw/x.md.", "segment_edge"),
        ("edw/x.md ", "segment_edge"),
        ("guide.md", "not_in_folder"),
        ("docs/guide.md", "not_in_folder"),
        ("README.md", "not_in_folder"),
        ("edw/..", "not_a_file"),
        (".", "not_a_file"),
        ("docs", "not_a_file"),
        ("edw/x.exe", "extension"),
        ("edw/x", "extension"),
        ("edw/.md", "extension"),
        ("edw/x.md.exe", "extension"),
        ("KB-MANIFEST.JSON", "not_in_folder"),
    ],
)
def test_refused_paths_name_their_reason(bad: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        norm(bad)
    assert err.value.details["reason"] == reason, err.value.message
    assert err.value.code == "invalid_argument"


def test_repo_root_as_documents_root() -> None:
    assert norm("edw/x.md", root="") == "edw/x.md"
    assert norm("gitkb.yml", root=".") == "gitkb.yml"
    with pytest.raises(InvalidArgument):
        norm("README.md", root="")


def test_nested_documents_root() -> None:
    assert norm("a/x.md", root="kb/docs/") == "kb/docs/a/x.md"
    assert norm("kb/docs/a/x.md", root="kb/docs") == "kb/docs/a/x.md"
    with pytest.raises(InvalidArgument):
        norm("a/../../x/y.md", root="kb/docs")


@pytest.mark.parametrize("root", ["../x", "a/.git", "c:/docs"])
def test_bad_documents_root(root: str) -> None:
    with pytest.raises(InvalidArgument):
        norm("edw/x.md", root=root)


def test_custom_extensions_case_insensitive() -> None:
    assert normalize_proposal_path("a/b.RST", documents_root="d", allowed_exts=(".rst",)) == "d/a/b.RST"
    with pytest.raises(InvalidArgument):
        normalize_proposal_path("a/b.md", documents_root="d", allowed_exts=(".rst",))


FRAGMENTS = st.sampled_from(
    [
        "docs",
        "DOCS",
        "Docs",
        "edw",
        "ops",
        "..",
        ".",
        "",
        ".git",
        ".GIT",
        "git~1",
        "%2e",
        "%2E%2e",
        "%2f",
        "%5c",
        "%252e",
        "%25",
        "%00",
        "\\",
        "/",
        "//",
        "C:",
        ":",
        "\x00",
        "\x1f",
        "\u202e",
        "\u200b",
        "\uff0e",
        "\uff0f",
        "\u2025",
        " ",
        "guide.md",
        "x.MD",
        "README.md",
        "a.exe",
        "kb-manifest.json",
        "gitkb.yml",
        "page.yaml",
        "data.csv",
        "notes.txt",
        "sub",
        "~",
        "é",
    ]
)
HOSTILE = st.one_of(
    st.lists(FRAGMENTS, min_size=1, max_size=8).map("".join),
    st.lists(FRAGMENTS, min_size=1, max_size=8).map("/".join),
    st.text(max_size=40),
    st.text(alphabet="./\\%2eEfF5cC:~gitGIT", max_size=30).map(lambda s: s + "/x.md"),
)


def _check_result(result: str, root: str) -> None:
    parts = result.split("/")
    root_parts = [p for p in root.split("/") if p]
    assert parts[: len(root_parts)] == root_parts
    rel = parts[len(root_parts) :]
    assert len(rel) >= 2 or (len(rel) == 1 and rel[0] in SIDECAR_NAMES)
    for seg in parts:
        assert seg not in ("", ".", "..")
        assert seg.casefold().rstrip(". ") not in (".git", "git~1")
        assert "\\" not in seg and ":" not in seg and "\x00" not in seg
    assert "%2e" not in result.lower() and "%2f" not in result.lower()
    assert normalize_proposal_path(result, documents_root=root) == result


@settings(max_examples=3000, deadline=None)
@given(HOSTILE, st.sampled_from(["docs", "kb/docs", ""]))
@example("docs/edw/%2e%2e/%2e%2e/x.md", "docs")
@example("edw/..%2F..%2Fx.md", "docs")
def test_hostile_paths_never_escape(path: str, root: str) -> None:
    try:
        result = normalize_proposal_path(path, documents_root=root)
    except InvalidArgument as err:
        assert err.details["reason"]
        return
    _check_result(result, root)
