"""Run ``gitkb`` in a subprocess with a pseudo-terminal as its stdin and stderr (stdout a pipe),
the way an operator's shell runs it; or with no terminal at all."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GITKB = str(Path(sys.executable).with_name("gitkb"))
TOML = '[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n'


@dataclass
class Ran:
    code: int
    tty: str  # what reached the terminal (stderr, and the echo of what was typed)
    stdout: str
    stderr: str = ""  # only without a terminal


def on_tty(*args: str, answer: str | None = None, timeout: float = 120.0) -> Ran:
    """``gitkb ARGS`` with stdin and stderr on a pty; ``answer`` is typed once a prompt appears."""
    master, slave = os.openpty()
    proc = subprocess.Popen([GITKB, *args], stdin=slave, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                got += data
                if answer is not None and b"[y/N]" in got:
                    os.write(master, answer.encode() + b"\n")
                    answer = None
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.stdout is not None
    return Ran(code, got.decode(errors="replace"), proc.stdout.read().decode(errors="replace"))


def no_tty(*args: str, stdin: str = "") -> Ran:
    """``gitkb ARGS`` with pipes for stdin, stdout and stderr."""
    proc = subprocess.run([GITKB, *args], input=stdin, capture_output=True, text=True, timeout=120)
    return Ran(proc.returncode, "", proc.stdout, proc.stderr)


def workspace(tmp_path: Path) -> Path:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text(TOML)
    return home


def pages(folder: Path, n: int, words: int = 400) -> Path:
    """``n`` markdown pages of ``words`` sentences each (several chunks a page)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = " ".join(f"Sentence {j} of page {i} talks about replicas and failover." for j in range(words))
        (folder / f"page{i:03}.md").write_text(f"# Page {i}\n\n{body}\n")
    return folder
