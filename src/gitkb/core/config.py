"""Settings: read once at an entry point (CLI, server, ``Workspace(...)``), then passed down.

Sources, later ones winning: built-in defaults, ``<home>/gitkb.toml``, environment
variables with the ``GITKB_`` prefix, explicit keyword arguments.

Credentials for git remotes and forge APIs are named by the admin, never by a caller::

    [[credentials]]
    name = "github-docs"
    hosts = ["github.com", "api.github.com"]   # the only hosts it is ever sent to
    token_env = "GITKB_GITHUB_TOKEN"           # or secrets_file (TOML, 0600) + secrets_key
    # username = "x-access-token"; ssh_key = "/srv/gitkb/.ssh/id_ed25519"
    # a GitHub App: app_id = "123", app_key_env = "GH_APP_KEY" (or secrets_file's github_app_key)

A source refers to one by ``credential = "github-docs"``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitkb.core.embedders.minilm_query import DEFAULT_QUERY_GRAPH, QUERY_GRAPHS
from gitkb.core.errors import InvalidArgument
from gitkb.core.hosts import split_authority

DEFAULT_HOME = ".gitkb"
CONFIG_FILE = "gitkb.toml"


# HNSW search depth (Chroma's ``ef_search``; Chroma's own default is 100) of every collection. ann20
# measured recall@20 against exact cosine (200 queries: 100 awsdocs questions, 100 SciFact claims; one
# ef per process), ef 100 / 200 / 400: 106k-vector home 0.890 / 0.946 / 0.962 (true top hit missed on
# 19 / 8 / 5); awsdocs home (31k), awsdocs questions 0.963 / 0.976 / 0.985. ANN CPU per query (106k,
# n 40) 1.1 / 1.2 / 1.6 ms, of a 10-30 ms search. SciFact nDCG@10 at top_n 10: semantic 0.6600 / 0.6605
# / 0.6605, hybrid 0.7316 / 0.7319 / 0.7319; awsdocs unchanged. 200: nearly free, 400 buys no eval
# figure. (``gitkb eval`` itself asks for 110-210 neighbours, deeper than ef 100 already.)
DEFAULT_EF_SEARCH = 200

MAX_EF_SEARCH = 10_000


def check_query_graph(value: object, where: str = "query_graph") -> str:
    """``value`` as the graph queries are embedded with (``minilm_query.QUERY_GRAPHS``); InvalidArgument
    naming ``where`` otherwise."""
    if value not in QUERY_GRAPHS:
        raise InvalidArgument(
            f"{where} must be one of {', '.join(QUERY_GRAPHS)} (int8: the default model's query graph "
            f"multiplying in int8; exact: the documents' graph), got {value!r}"
        )
    return str(value)


def check_ef_search(value: object, where: str = "ef_search") -> int:
    """``value`` as an HNSW search depth (an integer from 1 to :data:`MAX_EF_SEARCH`); InvalidArgument
    naming ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EF_SEARCH:
        raise InvalidArgument(
            f"{where} must be an integer from 1 to {MAX_EF_SEARCH} (the HNSW search depth; "
            f"default {DEFAULT_EF_SEARCH}), got {value!r}"
        )
    return value


# How long a chunk that left its index is remembered (``retired_chunks``, ``[catalog] retired_days``) so
# an old citation can still say what its lines say now; the writer prunes older rows (and every
# retirement of a chunk id but its latest). A citation older than that answers "no longer known".
DEFAULT_RETIRED_DAYS = 90.0
MAX_RETIRED_DAYS = 36_500.0


def check_retired_days(value: object, where: str = "retired_days") -> float:
    """``value`` as a retention in days (a number above 0, at most :data:`MAX_RETIRED_DAYS`);
    InvalidArgument naming ``where`` otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_RETIRED_DAYS
        or value != value  # NaN
    ):
        raise InvalidArgument(
            f"{where} must be a number of days above 0 and at most {MAX_RETIRED_DAYS:g} (how long a "
            f"retired chunk stays citable; default {DEFAULT_RETIRED_DAYS:g}), got {value!r}"
        )
    return float(value)


# How long a finished job (completed, failed, cancelled) stays in the queue's table (``[catalog]
# jobs_days``): the writer removes older ones, except the newest of each kind and index (what status
# reads). A removed job's id answers ``not_found`` saying so.
DEFAULT_JOBS_DAYS = 30
MAX_JOBS_DAYS = 36_500


def check_jobs_days(value: object, where: str = "jobs_days") -> int:
    """``value`` as a whole number of days from 1 to :data:`MAX_JOBS_DAYS`; InvalidArgument naming
    ``where`` otherwise (a boolean, a string, a fraction, 0 or a negative number)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_JOBS_DAYS:
        raise InvalidArgument(
            f"{where} must be a whole number of days from 1 to {MAX_JOBS_DAYS} (how long a finished job"
            f" is kept; default {DEFAULT_JOBS_DAYS}), got {value!r}"
        )
    return value


CREDENTIAL_REFS = ("token_env", "secrets_file", "secrets_key", "username", "ssh_key", "app_id", "app_key_env")


@dataclass(frozen=True)
class Credential:
    """An admin-configured credential: where its secret is (references, never a value) and the
    hosts it may be sent to."""

    name: str
    hosts: tuple[str, ...]
    token_env: str | None = None
    secrets_file: str | None = None
    secrets_key: str | None = None
    username: str | None = None
    ssh_key: str | None = None
    app_id: str | None = None
    app_key_env: str | None = None


def parse_credential(raw: Any, i: int = 0) -> Credential:
    """One ``[[credentials]]`` entry, checked (``InvalidArgument`` names the entry)."""
    if isinstance(raw, Credential):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"[[credentials]] entry {i} must be a table")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"[[credentials]] entry {i} needs a name")
    name = name.strip()
    unknown = sorted(set(raw) - {"name", "hosts", *CREDENTIAL_REFS})
    if unknown:
        raise InvalidArgument(
            f"[[credentials]] {name!r}: unknown key(s) {', '.join(unknown)}; "
            f"allowed: name, hosts, {', '.join(CREDENTIAL_REFS)}"
        )
    hosts = raw.get("hosts")
    if (
        not isinstance(hosts, list | tuple)
        or not hosts
        or not all(isinstance(h, str) and split_authority(h) for h in hosts)
    ):
        raise InvalidArgument(
            f"[[credentials]] {name!r}: hosts must be a non-empty list of host names "
            '(e.g. hosts = ["github.com", "api.github.com"]); it is sent to no other host'
        )
    refs: dict[str, str] = {}
    for key in CREDENTIAL_REFS:
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, int) and not isinstance(v, bool) and key == "app_id":
            v = str(v)
        if not isinstance(v, str) or not v.strip():
            raise InvalidArgument(f"[[credentials]] {name!r}: {key} must be a non-empty string")
        refs[key] = v.strip()
    if not any(k in refs for k in ("token_env", "secrets_file", "ssh_key", "app_key_env")):
        raise InvalidArgument(
            f"[[credentials]] {name!r} names no secret: give token_env, secrets_file, ssh_key or app_key_env"
        )
    return Credential(name=name, hosts=tuple(h.strip().lower() for h in hosts), **refs)


def parse_credentials(raw: Any) -> tuple[Credential, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise InvalidArgument("credentials must be a list of [[credentials]] tables")
    out = tuple(parse_credential(c, i) for i, c in enumerate(raw))
    if len({c.name for c in out}) != len(out):
        raise InvalidArgument("[[credentials]] names must be unique")
    return out


@dataclass(frozen=True)
class Settings:
    home: Path
    embedding_provider: str | None = "fastembed"
    embedding_model: str | None = None  # None: the provider's default model
    embedding_options: dict[str, Any] = field(default_factory=dict)
    embed_batch_size: int = 2  # the default model's texts per run (fastembed_minilm.DEFAULT_BATCH_SIZE)
    # [embedding] query_graph: how the default model embeds a search query (core/embedders/minilm_query)
    embed_query_graph: str = DEFAULT_QUERY_GRAPH
    max_file_bytes: int = 10 * 1024 * 1024
    chroma_host: str | None = None
    chroma_port: int | None = None
    chroma_headers: dict[str, str] = field(default_factory=dict)
    chroma_ef_search: int = DEFAULT_EF_SEARCH  # [chroma] ef_search: every collection's HNSW search depth
    promote_after_seconds: float = 2.0
    node: str | None = None  # the host name checkouts are recorded under (default: this host's name)
    credentials: tuple[Credential, ...] = ()  # [[credentials]]: the only secrets a source may use
    # [catalog] url / GITKB_CATALOG_URL: postgresql://... or sqlite:////abs/path (None: catalog_path)
    catalog_url: str | None = None
    catalog_retired_days: float = DEFAULT_RETIRED_DAYS  # [catalog] retired_days: retired chunks kept
    catalog_jobs_days: int = DEFAULT_JOBS_DAYS  # [catalog] jobs_days: finished jobs kept
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


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings the ``GITKB_*`` variables give (over gitkb.toml's), each validated."""
    values: dict[str, Any] = {}
    if env.get("GITKB_EMBEDDING_PROVIDER"):
        values["embedding_provider"] = env["GITKB_EMBEDDING_PROVIDER"]
    if env.get("GITKB_EMBEDDING_MODEL"):
        values["embedding_model"] = env["GITKB_EMBEDDING_MODEL"]
    if env.get("GITKB_EMBEDDING_QUERY_GRAPH"):
        values["embed_query_graph"] = check_query_graph(
            env["GITKB_EMBEDDING_QUERY_GRAPH"].strip(), "GITKB_EMBEDDING_QUERY_GRAPH"
        )
    if env.get("GITKB_CHROMA_HOST"):
        values["chroma_host"] = env["GITKB_CHROMA_HOST"]
    if env.get("GITKB_CHROMA_PORT"):
        values["chroma_port"] = int(env["GITKB_CHROMA_PORT"])
    if env.get("GITKB_CHROMA_EF_SEARCH"):
        raw_ef = env["GITKB_CHROMA_EF_SEARCH"].strip()
        ef = int(raw_ef) if raw_ef.isdigit() else raw_ef
        values["chroma_ef_search"] = check_ef_search(ef, "GITKB_CHROMA_EF_SEARCH")
    if env.get("GITKB_PROMOTE_AFTER_SECONDS"):
        values["promote_after_seconds"] = float(env["GITKB_PROMOTE_AFTER_SECONDS"])
    if env.get("GITKB_CATALOG_URL"):
        values["catalog_url"] = env["GITKB_CATALOG_URL"]
    if env.get("GITKB_CATALOG_RETIRED_DAYS"):
        raw_days = env["GITKB_CATALOG_RETIRED_DAYS"].strip()
        try:
            days: object = float(raw_days)
        except ValueError:
            days = raw_days
        values["catalog_retired_days"] = check_retired_days(days, "GITKB_CATALOG_RETIRED_DAYS")
    if env.get("GITKB_CATALOG_JOBS_DAYS"):
        raw_jobs = env["GITKB_CATALOG_JOBS_DAYS"].strip()
        jobs_days: object = int(raw_jobs) if raw_jobs.lstrip("-").isdigit() else raw_jobs
        values["catalog_jobs_days"] = check_jobs_days(jobs_days, "GITKB_CATALOG_JOBS_DAYS")
    if env.get("GITKB_NODE"):
        values["node"] = env["GITKB_NODE"]
    return values


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
    catalog = raw.get("catalog", {}) if isinstance(raw.get("catalog"), dict) else {}
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
    if "query_graph" in emb:
        values["embed_query_graph"] = check_query_graph(
            emb["query_graph"], f"{cfg_file}: [embedding] query_graph"
        )
    if "host" in chroma:
        values["chroma_host"] = str(chroma["host"])
    if "port" in chroma:
        values["chroma_port"] = int(chroma["port"])
    if isinstance(chroma.get("headers"), dict):
        values["chroma_headers"] = {str(k): str(v) for k, v in chroma["headers"].items()}
    if "ef_search" in chroma:
        values["chroma_ef_search"] = check_ef_search(chroma["ef_search"], f"{cfg_file}: [chroma] ef_search")
    if catalog.get("url"):
        values["catalog_url"] = str(catalog["url"])
    if "retired_days" in catalog:
        values["catalog_retired_days"] = check_retired_days(
            catalog["retired_days"], f"{cfg_file}: [catalog] retired_days"
        )
    if "jobs_days" in catalog:
        values["catalog_jobs_days"] = check_jobs_days(
            catalog["jobs_days"], f"{cfg_file}: [catalog] jobs_days"
        )
    if "credentials" in raw:
        values["credentials"] = parse_credentials(raw["credentials"])
    values.update(_from_env(env))
    values.update({k: v for k, v in overrides.items() if v is not None})
    if overrides.get("chroma_ef_search") is not None:
        check_ef_search(overrides["chroma_ef_search"], "chroma_ef_search")
    if overrides.get("embed_query_graph") is not None:
        check_query_graph(overrides["embed_query_graph"], "embed_query_graph")
    if overrides.get("catalog_retired_days") is not None:
        values["catalog_retired_days"] = check_retired_days(
            overrides["catalog_retired_days"], "catalog_retired_days"
        )
    if overrides.get("catalog_jobs_days") is not None:
        check_jobs_days(overrides["catalog_jobs_days"], "catalog_jobs_days")
    if "credentials" in overrides and overrides["credentials"] is not None:
        values["credentials"] = parse_credentials(overrides["credentials"])
    return replace(s, **values)
