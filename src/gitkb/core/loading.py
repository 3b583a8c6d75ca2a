"""Turn a file's bytes into a ``LoadedText`` (or a ``LoadError`` saying why not).

Rules (stable; chunk coordinates depend on them):

* The text is exactly the file's text: CRLF line ends, front matter and
  trailing whitespace are kept, so character offsets and line numbers of
  chunks match the file. The only change is that a leading byte-order mark
  is dropped (it is not a character of the document).
* Decoding: a UTF-8 BOM, UTF-32 or UTF-16 BOM picks the codec; otherwise
  strict UTF-8, and when that fails cp1252, accepted only if it decodes
  strictly and yields no C0 control characters besides ``\\t \\r \\n \\f``.
  Anything else is ``encoding_error`` naming the offset of the first byte that
  is not UTF-8.
* Binary: a known binary extension, or a NUL byte in the first 8 KiB (after
  BOM detection, so UTF-16 text is not mistaken for binary) -> ``binary``.
* Markdown (``.md .markdown .mdx``): front matter (YAML ``---`` or JSON,
  via python-frontmatter) goes to ``metadata`` with dates turned into ISO
  strings; invalid or non-mapping front matter is ``parse_error``; keys of
  ``required_frontmatter`` that are absent or null are ``missing_frontmatter``.
  Title: front matter ``title``, else the first level-1 ATX heading outside
  code fences (markdown escapes such as ``\\.`` and inline HTML such as
  ``<a name=...></a>`` removed), else the file stem.
  ``required_frontmatter`` applies to markdown only.
* PDF (``.pdf``, or content starting with ``%PDF-`` under a name that is
  not a known text extension): pypdf text of each page
  joined with ``"\\n\\n"``; ``metadata`` holds ``pages``, ``page_offsets``
  (character offset where each page's text starts) and the document's
  ``author``/``subject`` when present. Encrypted (unless the empty password
  opens it), broken, or text-less PDFs are ``parse_error``. Title: the PDF's
  title metadata, else the stem.
* Everything else that decodes: kind ``code`` for source and config
  extensions (``CODE_EXTENSIONS``, ``CODE_FILENAMES``), ``text`` otherwise;
  title is the file name; metadata is empty.
"""

from __future__ import annotations

import datetime as _dt
import io
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from gitkb.core.models import SKIP_CATEGORIES, LoadedText

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdx"})
PDF_EXTENSIONS = frozenset({".pdf"})
TEXT_EXTENSIONS = frozenset(
    {".txt", ".text", ".rst", ".adoc", ".asciidoc", ".org", ".csv", ".tsv", ".log", ".tex", ".textile"}
)
CODE_EXTENSIONS = frozenset(
    {
        # programming languages
        ".py",
        ".pyi",
        ".ipynb",
        ".js",
        ".jsx",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".groovy",
        ".gradle",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".hh",
        ".hxx",
        ".cs",
        ".fs",
        ".rb",
        ".php",
        ".pl",
        ".pm",
        ".swift",
        ".m",
        ".mm",
        ".lua",
        ".r",
        ".jl",
        ".hs",
        ".ml",
        ".mli",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".dart",
        ".zig",
        ".nim",
        ".vb",
        ".sql",
        ".proto",
        ".graphql",
        ".gql",
        # shells and build
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".ps1",
        ".psm1",
        ".bat",
        ".cmd",
        ".mk",
        ".cmake",
        # web
        ".html",
        ".htm",
        ".xml",
        ".xsl",
        ".svg",
        ".css",
        ".scss",
        ".sass",
        ".less",
        ".vue",
        ".svelte",
        # config
        ".yml",
        ".yaml",
        ".json",
        ".jsonc",
        ".json5",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".properties",
        ".env",
        ".tf",
        ".tfvars",
        ".hcl",
        ".nix",
        ".j2",
        ".jinja",
        ".tpl",
    }
)
CODE_FILENAMES = frozenset(
    {
        "Makefile",
        "GNUmakefile",
        "Dockerfile",
        "Containerfile",
        "Jenkinsfile",
        "Vagrantfile",
        "Gemfile",
        "Rakefile",
        "Procfile",
        "Justfile",
        "CMakeLists.txt",
        "BUILD",
        "WORKSPACE",
    }
)
BINARY_EXTENSIONS = frozenset(
    {
        # images
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".bmp",
        ".ico",
        ".icns",
        ".webp",
        ".tif",
        ".tiff",
        ".psd",
        ".heic",
        ".avif",
        ".xcf",
        # archives and packages
        ".zip",
        ".tar",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".txz",
        ".zst",
        ".7z",
        ".rar",
        ".lz",
        ".lzma",
        ".jar",
        ".war",
        ".ear",
        ".whl",
        ".egg",
        ".deb",
        ".rpm",
        ".apk",
        ".dmg",
        ".iso",
        ".img",
        ".msi",
        # executables and objects
        ".exe",
        ".dll",
        ".so",
        ".dylib",
        ".a",
        ".o",
        ".obj",
        ".lib",
        ".bin",
        ".class",
        ".pyc",
        ".pyo",
        ".pyd",
        ".wasm",
        ".elf",
        # media and fonts
        ".mp3",
        ".mp4",
        ".m4a",
        ".wav",
        ".ogg",
        ".flac",
        ".aac",
        ".avi",
        ".mov",
        ".mkv",
        ".webm",
        ".ttf",
        ".otf",
        ".woff",
        ".woff2",
        ".eot",
        # office documents (zip containers) and databases
        ".doc",
        ".docx",
        ".xls",
        ".xlsx",
        ".ppt",
        ".pptx",
        ".odt",
        ".ods",
        ".odp",
        ".epub",
        ".sqlite",
        ".sqlite3",
        ".db",
        ".mdb",
        ".accdb",
        # data and model files
        ".npy",
        ".npz",
        ".pkl",
        ".pickle",
        ".parquet",
        ".feather",
        ".arrow",
        ".h5",
        ".hdf5",
        ".onnx",
        ".pt",
        ".pth",
        ".ckpt",
        ".safetensors",
        ".tflite",
        ".pb",
    }
)

BINARY_SNIFF_BYTES = 8192
_C0 = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")  # C0 controls other than \t \n \f \r


class LoadError(Exception):
    """A file that cannot be turned into text; ``category`` is a skip category."""

    def __init__(self, category: str, detail: str) -> None:
        if category not in SKIP_CATEGORIES:
            raise ValueError(f"unknown skip category {category!r}")
        super().__init__(f"{category}: {detail}")
        self.category = category
        self.detail = detail


# --------------------------------------------------------------------------- entry points


def read_and_load(abs_path: Path, rel_path: str, *, required_frontmatter: Sequence[str] = ()) -> LoadedText:
    """Read ``abs_path`` and load it as the document stored under ``rel_path``."""
    try:
        with open(abs_path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise LoadError("internal_error", f"cannot read {abs_path}: {exc.strerror or exc}") from exc
    return load_bytes(rel_path, data, required_frontmatter=required_frontmatter)


def load_bytes(rel_path: str, data: bytes, *, required_frontmatter: Sequence[str] = ()) -> LoadedText:
    """Load a document's bytes; ``rel_path`` decides the kind by its extension."""
    name = _name(rel_path)
    ext = os.path.splitext(name)[1].lower()
    known_text = ext in MARKDOWN_EXTENSIONS or ext in TEXT_EXTENSIONS or ext in CODE_EXTENSIONS
    if ext in PDF_EXTENSIONS or (not known_text and data.startswith(b"%PDF-")):
        return load_pdf(rel_path, data)
    if ext in BINARY_EXTENSIONS:
        raise LoadError("binary", f"binary file type {ext}")
    text, _encoding = decode_text(data)
    if ext in MARKDOWN_EXTENSIONS:
        return load_markdown(rel_path, text, required_frontmatter=required_frontmatter)
    kind = "code" if ext in CODE_EXTENSIONS or name in CODE_FILENAMES else "text"
    return LoadedText(text=text, kind=kind, title=name)


# --------------------------------------------------------------------------- decoding


_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode_text(data: bytes) -> tuple[str, str]:
    """``(text, encoding)`` of a text file's bytes; the BOM, if any, is dropped.

    ``encoding`` is ``utf-8``, ``utf-8-sig``, ``utf-16-le``/``-be``,
    ``utf-32-le``/``-be`` (BOM stripped), or ``cp1252``.
    Raises ``LoadError`` (``binary`` or ``encoding_error``).
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                raise LoadError(
                    "encoding_error",
                    f"invalid {codec} at byte offset {exc.start + len(bom)} (file starts with a {codec} BOM)",
                ) from exc
            return text, ("utf-8-sig" if codec == "utf-8" else codec)
    nul = data.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    if nul >= 0:
        raise LoadError("binary", f"NUL byte at offset {nul}")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        utf8_error = exc
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        text = ""
    else:
        if _C0.search(text) is None:
            return text, "cp1252"
    bad = data[utf8_error.start]
    raise LoadError(
        "encoding_error",
        f"not UTF-8 (byte 0x{bad:02x} at offset {utf8_error.start}) and not plain cp1252 text",
    )


# --------------------------------------------------------------------------- markdown


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}#(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def load_markdown(rel_path: str, text: str, *, required_frontmatter: Sequence[str] = ()) -> LoadedText:
    """Markdown text -> ``LoadedText``; the stored text keeps the front matter."""
    metadata, body = split_frontmatter(text)
    missing = [key for key in required_frontmatter if metadata.get(key) is None]
    if missing:
        raise LoadError("missing_frontmatter", "missing front matter key(s): " + ", ".join(missing))
    title = _frontmatter_title(metadata) or first_h1(body) or _stem(rel_path)
    return LoadedText(text=text, kind="markdown", title=title, metadata=metadata)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``(metadata, body)``; ``({}, text)`` without front matter.

    Raises ``LoadError("parse_error")`` for front matter that is unterminated,
    not valid YAML/JSON, or not a mapping.
    """
    handler = frontmatter.detect_format(text, frontmatter.handlers)
    if handler is None:
        return {}, text
    try:
        raw, body = handler.split(text)
    except ValueError as exc:
        raise LoadError("parse_error", "front matter is not closed") from exc
    try:
        loaded = yaml.safe_load(raw) if isinstance(handler, YAMLHandler) else handler.load(raw)
    except (yaml.YAMLError, ValueError) as exc:
        raise LoadError("parse_error", f"invalid front matter: {_one_line(str(exc))}") from exc
    if loaded is None:
        return {}, body
    if not isinstance(loaded, dict):
        raise LoadError("parse_error", f"front matter must be a mapping, got {type(loaded).__name__}")
    return {str(k): _json_safe(v) for k, v in loaded.items()}, body


def first_h1(markdown: str) -> str | None:
    """The first level-1 ATX heading outside fenced code, cleaned; ``None`` if none."""
    fence: str | None = None
    for raw_line in io.StringIO(markdown):  # lazily: the heading is usually on line 1
        line = raw_line.rstrip("\r\n")
        match = _FENCE.match(line)
        if fence is not None:
            if match and _closes(match.group(1), fence, line):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        heading = _H1.match(line)
        if heading:
            title = clean_title(heading.group(1) or "")
            if title:
                return title
    return None


def _closes(marker: str, fence: str, line: str) -> bool:
    """A closing fence: same character, at least as long, nothing after it."""
    return marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip().lstrip(fence[0])


def clean_title(raw: str) -> str:
    """Heading text without inline HTML tags or markdown backslash escapes."""
    text = _HTML_TAG.sub("", raw)
    text = _ESCAPE.sub(r"\1", text)
    return " ".join(text.split())


def _frontmatter_title(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("title")
    if value is None:
        return None
    title = " ".join(str(value).split())
    return title or None


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_safe(v) for v in value]
    if isinstance(value, _dt.date | _dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _name(rel_path: str) -> str:
    return rel_path.replace("\\", "/").rsplit("/", 1)[-1]


def _stem(rel_path: str) -> str:
    name = _name(rel_path)
    return os.path.splitext(name)[0] or name


# --------------------------------------------------------------------------- pdf


def load_pdf(rel_path: str, data: bytes) -> LoadedText:
    """PDF bytes -> ``LoadedText`` with page texts joined by a blank line."""
    import pypdf  # imported here: loading it costs ~100 ms and most corpora hold no PDF

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                try:
                    opened = reader.decrypt("")
                except Exception as exc:
                    raise LoadError("parse_error", f"encrypted PDF: {_one_line(str(exc))}") from exc
                if not opened:
                    raise LoadError("parse_error", "encrypted PDF (a password is required)")
            pages = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
            info = reader.metadata
            title = _info_str(info, "title")
            author = _info_str(info, "author")
            subject = _info_str(info, "subject")
    except LoadError:
        raise
    except Exception as exc:  # pypdf raises many types for broken files
        raise LoadError(
            "parse_error", f"unreadable PDF: {type(exc).__name__}: {_one_line(str(exc))}"
        ) from exc
    offsets: list[int] = []
    position = 0
    for page_text in pages:
        offsets.append(position)
        position += len(page_text) + 2
    text = "\n\n".join(pages)
    if not text.strip():
        raise LoadError("parse_error", "no extractable text")
    metadata: dict[str, Any] = {"pages": len(pages), "page_offsets": offsets}
    if author:
        metadata["author"] = author
    if subject:
        metadata["subject"] = subject
    return LoadedText(text=text, kind="pdf", title=title or _stem(rel_path), metadata=metadata)


def _info_str(info: Any, attr: str) -> str | None:
    if info is None:
        return None
    try:
        value = getattr(info, attr, None)
    except Exception:
        return None
    if value is None:
        return None
    cleaned = " ".join(str(value).split())
    return cleaned or None
