"""A text file's bytes as ``str``: BOM, strict UTF-8, then plain cp1252; binary is refused.

The rules are in :mod:`gitkb.core.loading`. No I/O here.
"""

from __future__ import annotations

import re

from gitkb.core.load_errors import LoadError

BINARY_SNIFF_BYTES = 8192
_C0 = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")  # C0 controls other than \t \n \f \r


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
