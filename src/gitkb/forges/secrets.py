"""Forge credentials: where they come from, and how they stay out of sight.

A token (GitHub token, GitHub App private key, GitLab token) comes from an
environment variable or from a secrets file. The secrets file is TOML, readable
by its owner only (mode ``0600`` or stricter; anything else is refused)::

    github_token = "ghp_..."
    gitlab_token = "glpat-..."
    github_app_key = '''-----BEGIN RSA PRIVATE KEY-----
    ...
    -----END RSA PRIVATE KEY-----'''

A loaded value is a :class:`Secret`: its ``repr``/``str`` never show the value,
only :meth:`Secret.reveal` does. :func:`redact` scrubs known secrets and
anything shaped like a token out of a message before it reaches an error, a
log line or the audit log.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gitkb.core.errors import InvalidArgument

MASK = "***"


class Secret:
    """A string that does not print itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise InvalidArgument("a secret must be a non-empty string")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("gitkb.Secret", self._value))

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __reduce__(self) -> Any:  # never pickle the value by accident
        raise TypeError("a Secret cannot be pickled")


def load_secret(
    env_var: str | None = None,
    secrets_file: str | os.PathLike[str] | None = None,
    key: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Secret:
    """Load one secret: from ``env_var`` if it is set and non-empty, else from
    ``key`` in ``secrets_file`` (TOML, mode 0600; ``key`` may be dotted:
    ``github.token``).

    Raises :class:`InvalidArgument` with a message that names where it looked,
    never a value.
    """
    env = os.environ if environ is None else environ
    if env_var:
        value = env.get(env_var, "")
        if value.strip():
            return Secret(value.strip())
    if secrets_file is not None:
        if not key:
            raise InvalidArgument("load_secret: a secrets_file needs the key to read from it")
        return Secret(_read_key(Path(secrets_file), key))
    where = f"environment variable {env_var} is not set" if env_var else "no source was configured"
    raise InvalidArgument(
        f"forge credential missing: {where}",
        next_steps=[
            "export the token in the environment variable named in gitkb.toml",
            "or name a secrets file (mode 0600) and the key that holds it",
        ],
    )


def check_secrets_file(path: Path) -> None:
    """Refuse a secrets file that is missing, not a regular file, or readable
    (or writable) by anyone but its owner."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InvalidArgument(f"secrets file {path} does not exist") from None
    except OSError as exc:
        raise InvalidArgument(f"secrets file {path} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidArgument(f"secrets file {path} is not a regular file")
    if os.name == "posix" and st.st_mode & 0o077:
        mode = stat.S_IMODE(st.st_mode)
        raise InvalidArgument(
            f"secrets file {path} has mode {mode:04o}; refusing to read it: "
            "it must be readable by its owner only (0600)",
            next_steps=[f"chmod 600 {path}"],
        )


def _read_key(path: Path, key: str) -> str:
    check_secrets_file(path)
    try:
        data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"secrets file {path} cannot be read: {type(exc).__name__}") from None
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message quotes no values, only a position.
        raise InvalidArgument(f"secrets file {path} is not valid TOML: {exc}") from None
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            raise InvalidArgument(f"secrets file {path} has no key {key!r}")
        data = data[part]
    if not isinstance(data, str) or not data.strip():
        raise InvalidArgument(f"secrets file {path}: key {key!r} is not a non-empty string")
    return data.strip()


# Shapes that are credentials whatever their source.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), MASK),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"), MASK),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"), MASK),  # JWT
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*['\"]?(?:token|bearer|basic)\s+)[^\s'\",}]+"), r"\1" + MASK),
    (re.compile(r"(?i)\b((?:private|job)-token\s*[:=]\s*['\"]?)[^\s'\",}]+"), r"\1" + MASK),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^@\s/]+@"), r"\1" + MASK + "@"),  # user:password@host
)


def redact(text: str, secrets: Iterable[Secret | str | None] = ()) -> str:
    """Replace every known secret and anything token-shaped in ``text``."""
    out = str(text)
    values = sorted(
        {s.reveal() if isinstance(s, Secret) else s for s in secrets if s},
        key=len,
        reverse=True,
    )
    for value in values:
        if len(value) >= 4:
            out = out.replace(value, MASK)
    for pattern, repl in _PATTERNS:
        out = pattern.sub(repl, out)
    return out
