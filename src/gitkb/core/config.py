"""Settings: read once at an entry point (CLI, server, ``Workspace(...)``), then passed down.

Sources, later ones winning: built-in defaults, ``<home>/gitkb.toml``, environment
variables with the ``GITKB_`` prefix, explicit keyword arguments.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitkb.core.errors import InvalidArgument

DEFAULT_HOME = ".gitkb"
CONFIG_FILE = "gitkb.toml"


@dataclass(frozen=True)
class Settings:
    home: Path
    embedding_provider: str | None = "fastembed"
    embedding_model: str | None = None  # None: the provider's default model
    embedding_options: dict[str, Any] = field(default_factory=dict)
    embed_batch_size: int = 8
    max_file_bytes: int = 10 * 1024 * 1024
    chroma_host: str | None = None
    chroma_port: int | None = None
    chroma_headers: dict[str, str] = field(default_factory=dict)
    promote_after_seconds: float = 2.0
    raw: dict[str, Any] = field(default_factory=dict)  # the whole parsed gitkb.toml, for later sections

    @property
    def catalog_path(self) -> Path:
        return self.home / "catalog.sqlite3"

    @property
    def keywords_path(self) -> Path:
        return self.home / "keywords"

    @property
    def vectors_path(self) -> Path:
        return self.home / "vectors"

    @property
    def models_path(self) -> Path:
        return self.home / "models"

    @property
    def repos_path(self) -> Path:
        return self.home / "repos"

    def section(self, name: str) -> dict[str, Any]:
        v = self.raw.get(name, {})
        return dict(v) if isinstance(v, dict) else {}


def resolve_home(home: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    if home:
        return Path(home).expanduser().absolute()
    if env.get("GITKB_HOME"):
        return Path(env["GITKB_HOME"]).expanduser().absolute()
    return (Path.cwd() / DEFAULT_HOME).absolute()


def load_settings(
    home: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    env = os.environ if env is None else env
    root = resolve_home(home, env)
    raw: dict[str, Any] = {}
    cfg_file = root / CONFIG_FILE
    if cfg_file.is_file():
        try:
            raw = tomllib.loads(cfg_file.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{cfg_file} is not valid TOML: {exc}") from exc
    emb = raw.get("embedding", {}) if isinstance(raw.get("embedding"), dict) else {}
    chroma = raw.get("chroma", {}) if isinstance(raw.get("chroma"), dict) else {}
    s = Settings(home=root, raw=raw)
    values: dict[str, Any] = {}
    if "provider" in emb:
        values["embedding_provider"] = emb["provider"]
    if "model" in emb:
        values["embedding_model"] = emb["model"]
    if isinstance(emb.get("options"), dict):
        values["embedding_options"] = dict(emb["options"])
    if "batch_size" in emb:
        values["embed_batch_size"] = int(emb["batch_size"])
    if "host" in chroma:
        values["chroma_host"] = str(chroma["host"])
    if "port" in chroma:
        values["chroma_port"] = int(chroma["port"])
    if isinstance(chroma.get("headers"), dict):
        values["chroma_headers"] = {str(k): str(v) for k, v in chroma["headers"].items()}
    if env.get("GITKB_EMBEDDING_PROVIDER"):
        values["embedding_provider"] = env["GITKB_EMBEDDING_PROVIDER"]
    if env.get("GITKB_EMBEDDING_MODEL"):
        values["embedding_model"] = env["GITKB_EMBEDDING_MODEL"]
    if env.get("GITKB_CHROMA_HOST"):
        values["chroma_host"] = env["GITKB_CHROMA_HOST"]
    if env.get("GITKB_CHROMA_PORT"):
        values["chroma_port"] = int(env["GITKB_CHROMA_PORT"])
    if env.get("GITKB_PROMOTE_AFTER_SECONDS"):
        values["promote_after_seconds"] = float(env["GITKB_PROMOTE_AFTER_SECONDS"])
    values.update({k: v for k, v in overrides.items() if v is not None})
    return replace(s, **values)
