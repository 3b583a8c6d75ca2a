from __future__ import annotations

import io
from pathlib import Path

import pypdf
import pytest

from gitkb.core.load_errors import LoadError
from gitkb.core.loading import load_bytes, read_and_load
from gitkb.core.markdown_loading import clean_title, first_h1, split_frontmatter
from gitkb.core.text_decoding import decode_text


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF written by hand: one Helvetica text line per page."""
    count = len(pages)
    font_id = 3 + 2 * count
    info_id = font_id + 1
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
    ]
    for i, text in enumerate(pages):
        page_id, content_id = 3 + 2 * i, 4 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        assert page_id == len(objects)
        stream = f"BT /F1 24 Tf 72 700 Td ({text}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(f"<< /Title ({title}) >>".encode() if title else b"<< >>")
    assert len(objects) == info_id
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\n" % (len(objects) + 1, info_id)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return out


def blank_pdf() -> bytes:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=200, height=200)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def encrypt(data: bytes, user_password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password, owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def load_error(rel_path: str, data: bytes, **kw: object) -> LoadError:
    with pytest.raises(LoadError) as info:
        load_bytes(rel_path, data, **kw)  # type: ignore[arg-type]
    return info.value


# --------------------------------------------------------------------------- text and decoding


def test_crlf_and_whitespace_are_kept_exactly(tmp_path: Path) -> None:
    raw = b"# Title\r\n\r\nFirst line  \r\nsecond\ttab\r\n\r\n"
    path = tmp_path / "doc.md"
    path.write_bytes(raw)
    loaded = read_and_load(path, "docs/doc.md")
    assert loaded.text == raw.decode()
    assert loaded.text.count("\n") == raw.count(b"\n")
    assert loaded.title == "Title"


def test_utf8_bom_is_stripped_and_the_rest_kept() -> None:
    loaded = load_bytes("a.md", b"\xef\xbb\xbf# Caf\xc3\xa9\nbody\n")
    assert loaded.text == "# Café\nbody\n"
    assert loaded.title == "Café"
    assert decode_text(b"\xef\xbb\xbfx") == ("x", "utf-8-sig")


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_bom(codec: str) -> None:
    text = "# Überblick\r\nzeile zwei\r\n"
    data = text.encode(codec)
    if codec != "utf-16":
        data = ("\ufeff").encode(codec) + data
    loaded = load_bytes("notes.md", data)
    assert loaded.text == text
    assert loaded.title == "Überblick"


def test_cp1252_fallback() -> None:
    text, encoding = decode_text(b"caf\xe9 \x93quoted\x94\r\n")
    assert (text, encoding) == ("caf\xe9 \u201cquoted\u201d\r\n", "cp1252")
    assert load_bytes("legacy.txt", b"na\xefve\n").text == "na\u00efve\n"


def test_undecodable_bytes_name_the_offset() -> None:
    error = load_error("bad.txt", b"abc\x81def")  # 0x81 is undefined in cp1252 as well
    assert error.category == "encoding_error"
    assert "offset 3" in error.detail
    assert "0x81" in error.detail


def test_cp1252_with_control_characters_is_rejected() -> None:
    error = load_error("bad.txt", b"ok \xe9\x01\x02 more")
    assert error.category == "encoding_error"
    assert "offset 3" in error.detail


def test_utf8_with_controls_is_fine() -> None:
    assert load_bytes("log.txt", b"\x1b[31mred\x1b[0m\n").text == "\x1b[31mred\x1b[0m\n"


def test_nul_byte_means_binary() -> None:
    error = load_error("data.txt", b"abc\x00def")
    assert error.category == "binary"
    assert "offset 3" in error.detail


def test_nul_after_the_sniff_window_is_not_binary() -> None:
    data = b"a" * 9000 + b"\x00"
    assert load_bytes("long.txt", data).text.endswith("\x00")


@pytest.mark.parametrize(
    "name", ["logo.png", "lib.so", "main.o", "x.pyc", "store.sqlite", "a.zip", "IMG.JPG"]
)
def test_known_binary_extensions(name: str) -> None:
    assert load_error(name, b"looks like text").category == "binary"


# --------------------------------------------------------------------------- kinds and titles


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("src/app.py", "code"),
        ("deploy/values.yaml", "code"),
        ("conf/app.toml", "code"),
        ("Makefile", "code"),
        ("docker/Dockerfile", "code"),
        ("notes.txt", "text"),
        ("guide.rst", "text"),
        ("table.csv", "text"),
        ("README", "text"),
        ("weird.unknownext", "text"),
        ("page.mdx", "markdown"),
        ("page.markdown", "markdown"),
        ("PAGE.MD", "markdown"),
    ],
)
def test_kind_by_extension(rel: str, kind: str) -> None:
    loaded = load_bytes(rel, b"# hello\nprint('x')\n")
    assert loaded.kind == kind
    if kind != "markdown":
        assert loaded.title == rel.rsplit("/", 1)[-1]
        assert loaded.metadata == {}


def test_title_from_h1_strips_escapes_and_anchors() -> None:
    data = b'# Example: Using the AWS SDK for \\.NET Low\\-Level API<a name="LSI.Example"></a>\n\ntext\n'
    assert load_bytes("docs/x.md", data).title == "Example: Using the AWS SDK for .NET Low-Level API"


def test_title_rules_order() -> None:
    with_fm = b"---\ntitle: From Front Matter\n---\n# Heading\n"
    assert load_bytes("a.md", with_fm).title == "From Front Matter"
    assert load_bytes("a.md", b"intro\n\n## Sub\n\n# Real Title #\n").title == "Real Title"
    assert load_bytes("docs/ops/rotate-keys.md", b"no heading at all\n#hashtag\n").title == "rotate-keys"
    assert load_bytes("docs/ops/rotate.md", b"    # indented code\n").title == "rotate"


def test_h1_inside_code_fences_is_ignored() -> None:
    md = (
        "Intro\n\n```bash\n# install\npip install x\n```\n\n~~~~\n# not this\n```\n# nor this\n~~~~\n# Real\n"
    )
    assert first_h1(md) == "Real"
    assert first_h1("```\n# only in code\n```\n") is None


def test_clean_title() -> None:
    assert clean_title("Step 3\\: Configure \\(DAX\\)  <b>now</b>") == "Step 3: Configure (DAX) now"


# --------------------------------------------------------------------------- front matter


def test_front_matter_goes_to_metadata_and_text_is_whole_file() -> None:
    data = b"---\r\ntitle: Rotate keys\r\ntags: [ops, security]\r\nreviewed: 2024-05-01\r\n---\r\n# H\r\nbody\r\n"
    loaded = load_bytes("ops/rotate.md", data, required_frontmatter=["title", "tags"])
    assert loaded.kind == "markdown"
    assert loaded.text == data.decode()  # front matter kept so line numbers match the file
    assert loaded.metadata == {"title": "Rotate keys", "tags": ["ops", "security"], "reviewed": "2024-05-01"}
    assert loaded.title == "Rotate keys"


def test_empty_front_matter_is_fine() -> None:
    loaded = load_bytes("a.md", b"---\n---\n# T\n")
    assert loaded.metadata == {}
    assert loaded.title == "T"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"---\ntitle: [unclosed\n---\nbody\n", "invalid front matter"),
        (b"---\ntitle: x\nbody without end\n", "not closed"),
        (b"---\n- a\n- b\n---\nbody\n", "must be a mapping"),
        (b"---\ntitle: a: b: c\n---\n", "invalid front matter"),
    ],
)
def test_invalid_front_matter_is_a_parse_error(data: bytes, needle: str) -> None:
    error = load_error("bad.md", data)
    assert error.category == "parse_error"
    assert needle in error.detail


def test_yaml_front_matter_is_loaded_safely() -> None:
    error = load_error("evil.md", b"---\nx: !!python/object/apply:os.system ['true']\n---\n")
    assert error.category == "parse_error"


def test_missing_required_front_matter_names_the_keys() -> None:
    data = b"---\ntitle: T\nowner: null\n---\nbody\n"
    error = load_error("a.md", data, required_frontmatter=["title", "owner", "reviewed"])
    assert error.category == "missing_frontmatter"
    assert error.detail == "missing front matter key(s): owner, reviewed"
    error = load_error("b.md", b"# no front matter\n", required_frontmatter=["title"])
    assert error.category == "missing_frontmatter"
    # required keys concern markdown only
    assert load_bytes("c.txt", b"plain\n", required_frontmatter=["title"]).kind == "text"


def test_split_frontmatter_returns_body() -> None:
    metadata, body = split_frontmatter("---\na: 1\n---\n# H\n")
    assert metadata == {"a": 1}
    assert body.strip() == "# H"
    assert split_frontmatter("# H\n---\nx: 1\n---\n") == ({}, "# H\n---\nx: 1\n---\n")


# --------------------------------------------------------------------------- pdf


def test_pdf_text_is_extracted(tmp_path: Path) -> None:
    path = tmp_path / "runbook.pdf"
    path.write_bytes(make_pdf(["Hello gitkb PDF"], title="Key Rotation Runbook"))
    loaded = read_and_load(path, "docs/runbook.pdf")
    assert loaded.kind == "pdf"
    assert "Hello gitkb PDF" in loaded.text
    assert loaded.title == "Key Rotation Runbook"
    assert loaded.metadata["pages"] == 1
    assert loaded.metadata["page_offsets"] == [0]


def test_pdf_pages_are_joined_with_blank_lines_and_offsets_recorded() -> None:
    loaded = load_bytes("manual.pdf", make_pdf(["First page words", "Second page words", "Third"]))
    assert loaded.title == "manual"
    offsets = loaded.metadata["page_offsets"]
    assert loaded.metadata["pages"] == 3
    assert len(offsets) == 3
    assert loaded.text[offsets[1] :].startswith("Second page words")
    assert loaded.text[offsets[2] :].startswith("Third")
    assert loaded.text[offsets[1] - 2 : offsets[1]] == "\n\n"


def test_blank_pdf_has_no_extractable_text() -> None:
    error = load_error("blank.pdf", blank_pdf())
    assert (error.category, error.detail) == ("parse_error", "no extractable text")


def test_broken_pdf_is_a_parse_error() -> None:
    error = load_error("broken.pdf", b"%PDF-1.4\nthis is not a pdf at all\n")
    assert error.category == "parse_error"
    error = load_error("truncated.pdf", make_pdf(["Hello"])[:60])
    assert error.category == "parse_error"


def test_encrypted_pdf() -> None:
    error = load_error("locked.pdf", encrypt(make_pdf(["Secret words"]), "secret"))
    assert error.category == "parse_error"
    assert "encrypted" in error.detail
    opened = load_bytes("open.pdf", encrypt(make_pdf(["Open words"]), ""))
    assert "Open words" in opened.text


def test_pdf_is_recognised_by_content() -> None:
    assert load_bytes("download", make_pdf(["By magic"])).kind == "pdf"
    assert load_bytes("about-pdf.md", b"%PDF-1.4 is the header\n").kind == "markdown"


# --------------------------------------------------------------------------- errors


def test_unreadable_file_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as info:
        read_and_load(tmp_path / "gone.md", "gone.md")
    assert info.value.category == "internal_error"


def test_load_error_checks_its_category() -> None:
    error = LoadError("binary", "why")
    assert (error.category, error.detail, str(error)) == ("binary", "why", "binary: why")
    with pytest.raises(ValueError):
        LoadError("nonsense", "x")
