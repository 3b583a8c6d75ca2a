"""Attacks on this round's new surfaces (backup/restore, the MCP HTTP transport's gate, the renamed
parameters, compact citation pages), each asserting that nothing got through: nothing written where
it should not be, nothing restored, the request refused. Real SQLite, real git, the CLI runner, the
HTTP app and the MCP transport through their ASGI clients."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitkb.stores import backup_archive
from helpers import ok
from helpers.http_shape import error_code


def small_ws(make_ws: Callable[..., Any]) -> Any:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="notes"))
    ok(w.document_index("ADD_TEXT", index_name="notes", text="# a\n\nsome text\n", filepath="a.md"))
    return w


# -- the backup's output file --------------------------------------------------------------


def test_backup_never_writes_through_a_symlink_at_its_file_or_checksum_file(
    make_ws: Callable[..., Any], tmp_path: Path
) -> None:
    w = small_ws(make_ws)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()

    dangling = out / "a.backup"  # a symlink to where the attacker wants the archive (with secrets)
    dangling.symlink_to(tmp_path / "attacker-reads-this")
    assert error_code(w.backup(str(dangling))) == "conflict"
    assert dangling.is_symlink() and not (tmp_path / "attacker-reads-this").exists()

    side = out / "b.backup.sha256"  # a symlink at FILE.sha256 to a file the operator can write
    side.symlink_to(victim)
    assert error_code(w.backup(str(out / "b.backup"))) == "conflict"
    assert victim.read_text() == "precious\n" and not (out / "b.backup").exists()

    for name in (".c.backup.partial", ".c.backup.tmp"):  # the old fixed temporary name, and a guess
        (out / name).symlink_to(victim)
    made = ok(w.backup(str(out / "c.backup")))
    assert victim.read_text() == "precious\n"
    archive = out / "c.backup"
    assert not archive.is_symlink() and oct(archive.stat().st_mode & 0o777) == "0o600"
    side_c = backup_archive.checksum_path(archive)
    assert not side_c.is_symlink() and oct(side_c.stat().st_mode & 0o777) == "0o600"
    assert side_c.read_text().split()[0] == made["sha256"] == backup_archive.sha256_of(archive)
    assert not [p for p in out.iterdir() if p.name.endswith(".partial") and not p.is_symlink()]

    existing = out / "d.backup.sha256"  # a checksum file of another archive is not replaced either
    existing.write_text("0" * 64 + "  d.backup\n")
    assert error_code(w.backup(str(out / "d.backup"))) == "conflict"
    assert existing.read_text() == "0" * 64 + "  d.backup\n" and not (out / "d.backup").exists()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "a.backup",
            "b.backup.sha256",
            ".c.backup.partial",
            ".c.backup.tmp",
            "c.backup",
            "c.backup.sha256",
            "d.backup.sha256",
        ]
    )
