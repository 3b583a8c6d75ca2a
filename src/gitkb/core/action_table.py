"""declarative: every action gitkb offers, declared once.

An action has a name, its parameters (JSON Schema type and range, required,
mutually exclusive groups), the class a caller needs, whether it may be
promoted to a job, whether it resumes after a crash, and whether agents are
ever offered it. The library, CLI, HTTP API, MCP server, web page and the job
runner read this table; ``gitkb actions --json`` prints it.

Classes (see ``CLASS_INCLUDES``): ``read``; ``propose`` (staged edits and pull
requests on sources); ``write`` (content of indexes no source feeds);
``operate`` (reindex, embeddings, rechunk, sync, job cancel); ``review``
(approve, deny, merge on the local forge); ``admin`` (indexes, sources,
credentials, knowledge bases, agent bindings, settings). ``propose`` includes
``read``, ``write`` includes ``propose``, ``operate`` and ``review`` include
``read``, ``admin`` includes every class.

Two kinds of names: the ``document_index`` actions are upper case
(``SEARCH``); every other action is named like the library method that runs it
(``approve_review``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CLASSES = ("read", "propose", "write", "operate", "review", "admin")
CLASS_INCLUDES: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "propose": frozenset({"read", "propose"}),
    "write": frozenset({"read", "propose", "write"}),
    "operate": frozenset({"read", "operate"}),
    "review": frozenset({"read", "review"}),
    "admin": frozenset(CLASSES),
}

# Limits, the same on every interface.
MAX_TOP_N = 100  # SEARCH / ASK results (an evaluation needs 100-deep lists)
MAX_TOP_K = 50  # search_index results for an agent (its parameter is top_n, like SEARCH's)
MAX_QUERY_CHARS = 4000
MAX_PAGE = 50  # LIST_DOCUMENTS page
MAX_READ_COUNT = 10 * 1024 * 1024  # GET_DOCUMENT page (lines, chars or chunks): a whole 10 MB file
MAX_LIST = 500  # jobs, audit entries, reviews, proposals, sources per page

STRING: dict[str, Any] = {"type": "string"}
NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 128}
REF: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 200}
ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 100}
PATH: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 1024}
BOOL: dict[str, Any] = {"type": "boolean"}
OBJECT: dict[str, Any] = {"type": "object"}
NAMES: dict[str, Any] = {"type": "array", "items": NAME, "maxItems": 100}
QUERY: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS}
TIERS = ["hot", "warm", "cold"]
MODE: dict[str, Any] = {"enum": ["keyword", "semantic", "hybrid"]}
START: dict[str, Any] = {"type": "integer", "minimum": 0}


def _int(lo: int, hi: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "minimum": lo}
    if hi is not None:
        out["maximum"] = hi
    return out


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    doc: str = ""
    required: bool = False
    local_only: bool = False  # an in-process value (a callback): never a wire parameter


@dataclass(frozen=True)
class Action:
    name: str
    cls: str
    params: tuple[Param, ...]
    doc: str
    promotable: bool = False  # may run as a job and answer with a job_id
    resumable: bool = False  # a job of it that was running at a crash runs again
    agents: bool = False  # ever offered to agents (their binding mode still decides)
    exclusive: tuple[tuple[str, ...], ...] = ()  # at most one of each group
    target: str | None = None  # the parameter naming the index or source acted on
    builds: bool = False  # while it runs, the indexes it touches report ``building``
    passages: bool = False  # its answer holds retrieved document text (fenced as data for agents)
    # its job reads this server's disk where its parameters do not name it (the roots ADD_DOCUMENTS
    # recorded, a source's local-path url): a remote interface's call is held to [server] allowed_roots
    reads_disk: bool = False
    # the parameter naming or implying the source (a source or index, review_id, proposal_id,
    # chunk_id) whose url the action fetches from, pushes to or (the local forge) writes at once:
    # a remote interface's call is refused before it runs when that url is a path of this server's
    # disk outside [server] allowed_roots (``reads_disk`` is what a job carries to check again)
    reaches_source: str | None = None
    cli: str = ""  # the CLI command that runs it
    fields: dict[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", {p.name: p for p in self.params})

    @property
    def is_read(self) -> bool:
        return self.cls == "read"

    @property
    def wire_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.local_only)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.required)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class": self.cls,
            "doc": self.doc,
            "params": [
                {"name": p.name, "schema": p.schema, "required": p.required, "doc": p.doc}
                for p in self.wire_params
            ],
            "exclusive": [list(g) for g in self.exclusive],
            "promotable": self.promotable,
            "resumable": self.resumable,
            "agents": self.agents,
            "builds": self.builds,
            "passages": self.passages,
            "cli": self.cli,
        }


def P(name: str, schema: dict[str, Any], doc: str = "", *, required: bool = False) -> Param:
    return Param(name, schema, doc, required)


PROGRESS = Param("progress", {}, "a callback(stage, done, total)", local_only=True)
PAGE = (P("start", START, "the first item of the page"), P("count", _int(1, MAX_LIST), "items per page"))
INDEX = P("index_name", NAME, "the index (name)", required=True)
CHUNK = (
    P("chunk_size", _int(1), "chunk size in word pieces"),
    P("chunk_overlap", _int(0), "overlap between neighbouring chunks"),
    P("chunk_strategy", {"enum": ["auto", "sentence", "one_chunk_per_doc"]}, "how to cut"),
)
PLACE = (
    P("tenant", STRING, "the tenant the documents belong to"),
    P("tier", {"enum": TIERS}, "hot, warm or cold"),
    P("ttl_seconds", {"type": "number", "exclusiveMinimum": 0}, "expire after this many seconds"),
)
# gitkb eval --top-n: search as a caller does (10), not as deep as the measures want (100 / 50 hits)
EVAL_TOP_N = P("top_n", _int(1, MAX_TOP_N), f"hits each query asks for, 1-{MAX_TOP_N} (default 100 / 50)")
SEARCHING = (
    P("query", QUERY, "what to look for", required=True),
    P("index_name", NAME, "one index"),
    P("indexes", NAMES, "several indexes (default all)"),
    P("top_n", _int(1, MAX_TOP_N), f"how many results, 1-{MAX_TOP_N}"),
    P("mode", MODE, "keyword, semantic or hybrid"),
    P("tenant", STRING, "only this tenant's documents"),
    P("tiers", {"type": "array", "items": {"enum": TIERS}, "maxItems": 3}, "only these tiers"),
)
SOURCE = P("source", REF, "the source name or id", required=True)
SOURCE_OR_INDEX = P(
    "source_id_or_index", REF, "the source name or id, or an index fed by one source", required=True
)
REPO_PATH = P("relative_path", PATH, "the file, relative to the repository root", required=True)
NOTE = P("note", {"type": "string", "maxLength": 4000}, "why: goes into the commit message")
REVIEW_ID = P("review_id", ID, "the review", required=True)
AGENT = P("agent_id", NAME, "the agent", required=True)
BINDING_MODE = {"enum": ["read", "propose", "write"]}


def _di(name: str, cls: str, params: tuple[Param, ...], doc: str, cli: str, **kw: Any) -> Action:
    return Action(name, cls, params, doc, cli=cli, **kw)


DOCUMENT_INDEX: tuple[Action, ...] = (
    _di(
        "CREATE_INDEX",
        "admin",
        (
            INDEX,
            *CHUNK,
            P("embeddings", BOOL),
            P("embedding_provider", STRING),
            P("embedding_model", STRING),
            P("settings", OBJECT),
        ),
        "create an index",
        "gitkb index create",
        target="index_name",
    ),
    _di(
        "RENAME_INDEX",
        "admin",
        (INDEX, P("new_index_name", NAME, required=True)),
        "rename an index",
        "gitkb index rename",
        target="index_name",
        resumable=True,
    ),
    _di(
        "DELETE_INDEX",
        "admin",
        (INDEX,),
        "delete an index with its documents and vectors",
        "gitkb index delete",
        target="index_name",
        resumable=True,
        builds=True,
    ),
    _di("LIST_INDICES", "read", (), "the indexes", "gitkb index list", agents=True),
    _di(
        "GET_INDICES_STATS",
        "read",
        (),
        "documents, chunks and settings per index",
        "gitkb index stats",
        agents=True,
    ),
    _di(
        "SET_SEARCH_SETTINGS",
        "admin",
        (INDEX, P("settings", OBJECT), P("reset", BOOL)),
        "set how an index is ranked",
        "gitkb index tune",
        target="index_name",
        resumable=True,
    ),
    _di(
        "GET_SEARCH_SETTINGS",
        "read",
        (INDEX,),
        "how an index is ranked and where each value comes from",
        "gitkb index tune",
        target="index_name",
        agents=True,
    ),
    _di(
        "ADD_DOCUMENTS",
        "write",
        (
            INDEX,
            P("filepath", PATH, "a file or directory", required=True),
            *CHUNK,
            P("base_path", PATH),
            *PLACE,
            PROGRESS,
        ),
        "ingest files or a directory",
        "gitkb add",
        target="index_name",
        promotable=True,
        resumable=True,
        builds=True,
    ),
    _di(
        "ADD_TEXT",
        "write",
        (INDEX, P("text", STRING, required=True), P("metadata", OBJECT), P("filepath", PATH), *CHUNK, *PLACE),
        "ingest raw text",
        "gitkb add-text",
        target="index_name",
        promotable=True,
        resumable=True,
        agents=True,
    ),
    _di(
        "LIST_DOCUMENTS",
        "read",
        (
            INDEX,
            P("path_filter", STRING),
            P("query", STRING),
            P("show_files_only", BOOL),
            P("start", START),
            P("count", _int(1, MAX_PAGE)),
        ),
        "a page of an index's documents",
        "gitkb docs list",
        target="index_name",
        agents=True,
        passages=True,
    ),
    _di(
        "GET_DOCUMENT",
        "read",
        (
            INDEX,
            P("file_id", ID),
            P("filepath", PATH),
            P("pagination_mode", {"enum": ["lines", "chars", "chunks"]}),
            P("start", START),
            P("count", _int(0, MAX_READ_COUNT)),
        ),
        "a page of one document",
        "gitkb docs get",
        target="index_name",
        agents=True,
        exclusive=(("file_id", "filepath"),),
        passages=True,
    ),
    _di(
        "DELETE_DOCUMENT",
        "write",
        (INDEX, P("file_id", ID), P("filepath", PATH)),
        "delete a document",
        "gitkb docs rm",
        target="index_name",
        resumable=True,
        agents=True,
        exclusive=(("file_id", "filepath"),),
    ),
    _di(
        "RENAME_DOCUMENT",
        "write",
        (INDEX, P("filepath", PATH, required=True), P("new_filename", PATH, required=True)),
        "rename a document",
        "gitkb docs mv",
        target="index_name",
        agents=True,
    ),
    _di("SEARCH", "read", SEARCHING, "search with citations", "gitkb search", agents=True, passages=True),
    _di(
        "ASK",
        "read",
        (*SEARCHING, P("answer_mode", {"enum": ["extractive", "generative"]})),
        "an answer quoted from the sources, with footnotes",
        "gitkb ask",
        agents=True,
        passages=True,
    ),
    _di(
        "RECHUNK",
        "operate",
        (INDEX, *CHUNK, PROGRESS),
        "re-chunk an index in place",
        "gitkb index rechunk",
        target="index_name",
        promotable=True,
        resumable=True,
        builds=True,
    ),
)


def _m(name: str, cls: str, params: tuple[Param, ...], doc: str, cli: str, **kw: Any) -> Action:
    return Action(name, cls, params, doc, cli=cli, **kw)


METHODS: tuple[Action, ...] = (
    # status and jobs
    _m(
        "get_index_status",
        "read",
        (),
        "queryable/building/failed, queue, in-flight job, dirty counts",
        "gitkb status",
        agents=True,
    ),
    # An operator read: counts over every index (never offered to agents, whose view is narrowed).
    # ``read``, not ``operate``: the scraper's token then cannot cancel jobs or reindex.
    _m("metrics", "read", (), "counts for GET /metrics: jobs, queue, writer, documents, reviews", ""),
    _m(
        "get_job_result",
        "read",
        (P("job_id", ID, required=True),),
        "the state of a job",
        "gitkb jobs get",
        agents=True,
    ),
    _m(
        "list_jobs",
        "read",
        (P("state", STRING), *PAGE),
        "the job queue",
        "gitkb jobs list",
    ),
    _m(
        "wait_job",
        "read",
        (P("job_id", ID, required=True), P("timeout", {"type": "number", "minimum": 0}), PROGRESS),
        "wait for a job to finish",
        "gitkb jobs wait",
    ),
    _m(
        "cancel_job",
        "operate",
        (P("job_id", ID, required=True),),
        "cancel a queued or running job",
        "gitkb jobs cancel",
    ),
    _m(
        "reindex",
        "operate",
        (P("force", BOOL), P("index_name", NAME), PROGRESS),
        "catch up with files changed on disk",
        "gitkb reindex",
        promotable=True,
        resumable=True,
        target="index_name",
        builds=True,
        reads_disk=True,
    ),
    _m(
        "purge_expired",
        "operate",
        (),
        "delete documents past their TTL",
        "",
        promotable=True,
        resumable=True,
    ),
    # embeddings
    _m(
        "embeddings_status",
        "read",
        (),
        "the embedding identity and vector counts",
        "gitkb embeddings status",
        agents=True,
    ),
    _m(
        "wait_for_vectors",
        "read",
        (
            P(
                "vectors_range",
                {"type": "array", "items": _int(0), "minItems": 2, "maxItems": 2},
                required=True,
            ),
            PROGRESS,
        ),
        "wait until the chunks a write reported have their vectors; how many were embedded and reused",
        "",
    ),
    _m(
        "build_embeddings",
        "operate",
        (P("force", BOOL), PROGRESS),
        "embed every chunk that lacks a vector",
        "gitkb embeddings build",
        promotable=True,
        resumable=True,
        builds=True,
    ),
    _m(
        "reembed",
        "operate",
        (P("index_name", NAME), PROGRESS),
        "re-embed an index into its active identity",
        "gitkb embeddings reembed",
        promotable=True,
        resumable=True,
        target="index_name",
        builds=True,
    ),
    # One action, class operate with or without ``repair``: the check reads every index's and
    # tenant's chunk ids and the clones' state (an operator's view, not a reader's), and one class
    # per action keeps the policy's decision a single lookup.
    _m(
        "verify",
        "operate",
        (P("index_name", NAME, "only this index"), P("repair", BOOL, "fix what the derived stores can")),
        "compare the catalog with the keyword index, vectors, clones and watermarks; repair them",
        "gitkb verify",
        reads_disk=True,  # its repair re-clones or fetches a source: a local-path url only inside the roots
    ),
    # Backup and restore read or write files on the disk of the process that runs them and carry the
    # whole catalog (webhook secrets and audit included): admin, never offered to agents, and on
    # purpose not on HTTP or MCP -- the CLI (`gitkb backup`, `gitkb restore`) and the library only.
    _m(
        "backup",
        "admin",
        (P("path", PATH, "the archive file to write (a new file)", required=True), PROGRESS),
        "one archive of the catalog, gitkb.toml and the clones' branches, taken while the server runs",
        "gitkb backup",
    ),
    _m(
        "restore",
        "admin",
        (
            P("archive", PATH, "an archive `gitkb backup` wrote", required=True),
            P("directory", PATH, "the new workspace's directory, absent or empty", required=True),
            P("sha256", {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"}, "the archive's sha256"),
            PROGRESS,
            P("catalog_url", {"type": "string"}, "an empty PostgreSQL database for the catalog"),
            P(
                "new_workspace_id",
                BOOL,
                "a workspace id of its own (its vectors re-embedded into its own collections), to run beside "
                "the original on the same Chroma server",
            ),
        ),
        "a new workspace from an archive: catalog, settings, clones; keyword index and vectors rebuilt",
        "gitkb restore",
    ),
    _m(
        "set_embedding_identity",
        "admin",
        (P("provider", NAME, required=True), P("model", STRING)),
        "change the workspace's embedding identity",
        "gitkb embeddings use",
    ),
    # sources
    _m(
        "source_add",
        "admin",
        (
            P("name", NAME, required=True),
            P("url", {"type": "string", "minLength": 1, "maxLength": 2048}, required=True),
            P("branch", NAME),
            P("documents_root", PATH),
            P("index", {"anyOf": [NAME, NAMES]}),
            P("include", {"type": "array", "items": STRING}),
            P("exclude", {"type": "array", "items": STRING}),
            P("forge", OBJECT),
            P("auth", OBJECT),
            P("credential", NAME, "a [[credentials]] entry of gitkb.toml, sent only to its hosts"),
            P("webhook_secret", STRING),
        ),
        "follow a git repository",
        "gitkb source add",
    ),
    _m("source_list", "read", PAGE, "the sources", "gitkb source list"),
    _m(
        "source_sync",
        "operate",
        (SOURCE, P("commit", {"type": "string", "maxLength": 64}), P("full", BOOL), PROGRESS),
        "fetch and re-index what changed",
        "gitkb source sync",
        promotable=True,
        resumable=True,
        target="source",
        builds=True,
        reads_disk=True,
        reaches_source="source",
    ),
    _m(
        "source_rollback",
        "admin",
        (SOURCE, P("commit", {"type": "string", "minLength": 7, "maxLength": 64}, required=True), PROGRESS),
        "move a source's indexes back to an older commit of its tracked branch",
        "gitkb source rollback",
        promotable=True,
        resumable=True,
        target="source",
        builds=True,
        reads_disk=True,
        reaches_source="source",
    ),
    _m(
        "source_remove",
        "admin",
        (SOURCE, P("keep_documents", BOOL)),
        "stop following a source",
        "gitkb source remove",
        target="source",
    ),
    _m(
        "checkout",
        "admin",  # it writes a folder the caller names on the server's disk
        (
            SOURCE,
            P("directory", PATH, "an absolute folder on the server's disk, new or empty", required=True),
        ),
        "a read-only working copy of the source at its synced commit, refreshed by every sync",
        "gitkb checkout",
        target="source",
        reaches_source="source",  # the clone, cloned again from the url when it went missing
    ),
    # proposals and reviews
    _m(
        "propose_kb_edit",
        "propose",
        (SOURCE_OR_INDEX, REPO_PATH, P("content", STRING), P("search", STRING), P("replace", STRING), NOTE),
        "stage an edit on the proposal branch",
        "gitkb propose",
        agents=True,
        target="source_id_or_index",
        exclusive=(("content", "search"),),
        reaches_source="source_id_or_index",
    ),
    _m(
        "propose_kb_delete",
        "propose",
        (SOURCE_OR_INDEX, REPO_PATH, NOTE),
        "stage a delete",
        "gitkb propose --delete",
        agents=True,
        target="source_id_or_index",
        reaches_source="source_id_or_index",
    ),
    _m(
        "propose_kb_rename",
        "propose",
        (SOURCE_OR_INDEX, REPO_PATH, P("new_relative_path", PATH, required=True), NOTE),
        "stage a rename",
        "gitkb propose --rename-to",
        agents=True,
        target="source_id_or_index",
        reaches_source="source_id_or_index",
    ),
    _m(
        "list_proposals",
        "read",
        (P("source", REF), P("state", STRING), *PAGE),
        "staged proposals",
        "gitkb proposals list",
    ),
    _m(
        "show_proposal",
        "read",
        (P("proposal_id", ID, required=True),),
        "one proposal with its diff",
        "gitkb proposals show",
        reaches_source="proposal_id",  # the clone, cloned again (its branch fetched) when it lacks them
    ),
    _m(
        "discard_proposal",
        "propose",
        (P("proposal_id", ID, required=True),),
        "drop a staged proposal",
        "gitkb proposals discard",
        reaches_source="proposal_id",  # the clone, cloned again from the url when it went missing
    ),
    _m(
        "refresh_proposals",
        "propose",
        (SOURCE,),
        "make the staged proposals again on the target branch's head now (applied or conflict each)",
        "gitkb proposals refresh",
        agents=True,
        target="source",
        reaches_source="source",
    ),
    _m(
        "open_kb_pull_request",
        "propose",
        (
            SOURCE_OR_INDEX,
            P("target_index", NAME),
            P("title", {"type": "string", "maxLength": 300}),
            P("body", {"type": "string", "maxLength": 20000}),
            P("commit_message", {"type": "string", "maxLength": 4000}),
            P(
                "requested_by",
                NAME,
                "who asks: agent:<id>, token:<name> or local:<user> (set from the caller)",
            ),
            P(
                "proposal_ids",
                {"type": "array", "items": ID, "minItems": 1, "maxItems": 100},
                "review only these staged proposals (prop_...); default: all staged",
            ),
        ),
        "ask for a review of the staged proposals, then the PR/MR",
        "gitkb pr open",
        agents=True,
        target="source_id_or_index",
        reaches_source="source_id_or_index",
    ),
    _m(
        "list_pull_requests",
        "read",
        (SOURCE, P("state", STRING)),
        "change requests of a source",
        "gitkb pr list",
        target="source",
    ),
    _m(
        "list_reviews",
        "read",
        (P("state", STRING), P("source", REF), *PAGE),
        "reviews, pending first",
        "gitkb review list",
        # it settles the named source's in-flight pushes (a fetch); no source named: those of the
        # sources the caller may reach only (Workspace.list_reviews, reach.reachable)
        reaches_source="source",
    ),
    _m(
        "show_review",
        "read",
        (REVIEW_ID,),
        "one review: diff, changed files, decision",
        "gitkb review show",
        reaches_source="review_id",  # it settles an in-flight push: fetches the proposal branch
    ),
    _m(
        "approve_review",
        "review",
        (
            REVIEW_ID,
            P("reviewer", NAME),
            P("overwrite", BOOL, "replace the commits others pushed to the branch"),
        ),
        "push with a lease and open or update the PR/MR",
        "gitkb review approve",
        reaches_source="review_id",  # the push
    ),
    _m(
        "deny_review",
        "review",
        (
            REVIEW_ID,
            P("reason", {"type": "string", "minLength": 1, "maxLength": 4000}, required=True),
            P("reviewer", NAME),
        ),
        "deny with a reason",
        "gitkb review deny",
        reaches_source="review_id",  # it settles an in-flight push: fetches the proposal branch
    ),
    _m(
        "forge_merge",
        "review",
        (SOURCE, P("number", _int(1), required=True), P("wait", BOOL)),
        "merge a change request on the local forge",
        "gitkb forge merge",
        target="source",
        reads_disk=True,  # the local forge's remote is a path of this disk: merged into, then synced
        reaches_source="source",
    ),
    _m(
        "forge_close",
        "review",
        (SOURCE, P("number", _int(1), required=True)),
        "close a change request on the local forge",
        "gitkb forge close",
        target="source",
        reaches_source="source",
    ),
    _m(
        "cite_check",
        "read",
        (P("chunk_id", ID, required=True),),
        "is a cited passage still there",
        "gitkb cite check",
        agents=True,
        reaches_source="chunk_id",  # fetches the branch head of the chunk's source
    ),
    _m(
        "list_audit",
        "admin",
        (P("target", STRING), *PAGE),
        "the audit log",
        "",
    ),
    # knowledge bases and agents
    _m(
        "kb_create",
        "admin",
        (P("name", NAME, required=True), P("indexes", NAMES, required=True)),
        "a knowledge base over indexes",
        "gitkb kb create",
    ),
    _m("kb_list", "read", (), "the knowledge bases", "gitkb kb list"),
    _m(
        "kb_delete",
        "admin",
        (P("name", NAME, required=True), P("force", BOOL)),
        "delete a knowledge base",
        "gitkb kb delete",
    ),
    _m(
        "agent_assign",
        "admin",
        (
            AGENT,
            P("kbs", NAMES, required=True),
            P("mode", BINDING_MODE),
            P("read_only", BOOL),
            P(
                "default_top_n",
                _int(1, MAX_TOP_K),
                f"the agent's default number of search results, 1-{MAX_TOP_K}",
            ),
        ),
        "bind an agent to knowledge bases",
        "gitkb agent assign",
        exclusive=(("mode", "read_only"),),
    ),
    _m(
        "agent_unassign",
        "admin",
        (AGENT, P("kbs", NAMES, required=True)),
        "unbind an agent",
        "gitkb agent unassign",
    ),
    _m("agent_show", "admin", (AGENT,), "an agent's knowledge bases and indexes", "gitkb agent show"),
    _m("agent_usage", "admin", (AGENT,), "an agent's query embeddings", "gitkb agent usage"),
    _m(
        "list_knowledge_bases",
        "read",
        (P("agent_id", NAME),),
        "knowledge bases (an agent's own)",
        "gitkb kb list",
        agents=True,
    ),
    _m(
        "search_index",
        "read",
        (
            P("query", QUERY, required=True),
            P("indexes", NAMES),
            P("top_n", _int(1, MAX_TOP_K), f"how many results, 1-{MAX_TOP_K}"),
            P("tenant", STRING),
            P("tiers", SEARCHING[-1].schema),
            P("mode", MODE),
            P("agent_id", NAME),
        ),
        "search with citations",
        "gitkb search",
        agents=True,
    ),
    # evaluation
    _m(
        "eval_beir",
        "admin",
        (
            P("path", PATH, required=True),
            P("split", {"enum": ["train", "test", "dev"]}),
            P("mode", MODE),
            P("index_name", NAME),
            *CHUNK,
            EVAL_TOP_N,
            PROGRESS,
        ),
        "retrieval quality on a BEIR folder",
        "gitkb eval beir",
    ),
    _m(
        "eval_qa",
        "admin",
        (
            P("path", PATH, required=True),
            P("mode", MODE),
            P("index_name", NAME),
            P("ask", BOOL),
            EVAL_TOP_N,
            PROGRESS,
        ),
        "retrieval quality on a QA folder",
        "gitkb eval qa",
    ),
)

ACTIONS: dict[str, Action] = {a.name: a for a in (*DOCUMENT_INDEX, *METHODS)}
DOCUMENT_INDEX_NAMES: tuple[str, ...] = tuple(a.name for a in DOCUMENT_INDEX)


def get(name: str) -> Action | None:
    return ACTIONS.get(name)


def classes_of(granted: frozenset[str] | set[str] | tuple[str, ...]) -> frozenset[str]:
    """Every class the granted ones include (``admin`` → all)."""
    out: set[str] = set()
    for g in granted:
        out |= CLASS_INCLUDES.get(g, frozenset())
    return frozenset(out)
