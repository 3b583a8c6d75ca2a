"""Error hints in CLI words: the library's messages name actions and methods (``CREATE_INDEX``,
``propose_kb_edit(...)``), which is right for the action API, MCP and HTTP; on the terminal
they become the commands that do the same (``gitkb index create NAME``).

One table, action or method name → CLI command; ``cli_words`` rewrites a sentence with it
(only what goes to stderr: ``--json`` still prints the response dict exactly).
"""

from __future__ import annotations

import re

# name → (the command, the arguments shown when the hint names no values)
COMMANDS: dict[str, tuple[str, str]] = {
    "CREATE_INDEX": ("gitkb index create", "NAME"),
    "LIST_INDICES": ("gitkb index list", ""),
    "RENAME_INDEX": ("gitkb index rename", "OLD NEW"),
    "DELETE_INDEX": ("gitkb index delete", "NAME"),
    "GET_INDICES_STATS": ("gitkb index stats", ""),
    "RECHUNK": ("gitkb index rechunk", "NAME"),
    "SET_SEARCH_SETTINGS": ("gitkb index tune", "NAME"),
    "GET_SEARCH_SETTINGS": ("gitkb index tune", "NAME"),
    "ADD_DOCUMENTS": ("gitkb add", "INDEX PATH"),
    "ADD_TEXT": ("gitkb add-text", "INDEX TEXT"),
    "LIST_DOCUMENTS": ("gitkb docs list", "INDEX"),
    "GET_DOCUMENT": ("gitkb docs get", "INDEX PATH"),
    "DELETE_DOCUMENT": ("gitkb docs rm", "INDEX PATH"),
    "RENAME_DOCUMENT": ("gitkb docs mv", "INDEX PATH NEW_NAME"),
    "SEARCH": ("gitkb search", "QUERY"),
    "ASK": ("gitkb ask", "QUESTION"),
    "get_index_status": ("gitkb status", ""),
    "get_job_result": ("gitkb jobs get", "JOB_ID"),
    "list_jobs": ("gitkb jobs list", ""),
    "cancel_job": ("gitkb jobs cancel", "JOB_ID"),
    "build_embeddings": ("gitkb embeddings build", ""),
    "source_sync": ("gitkb source sync", "NAME"),
    "source_list": ("gitkb source list", ""),
    "propose_kb_edit": ("gitkb propose", "SOURCE PATH --content-file F"),
    "propose_kb_delete": ("gitkb propose", "SOURCE PATH --delete"),
    "propose_kb_rename": ("gitkb propose", "SOURCE PATH --rename-to NEW"),
    "list_proposals": ("gitkb proposals list", ""),
    "open_kb_pull_request": ("gitkb pr open", "SOURCE"),
    "list_reviews": ("gitkb review list", ""),
    "list_knowledge_bases": ("gitkb kb list", ""),
    "kb_create": ("gitkb kb create", "NAME --index INDEX"),
    "kb_delete": ("gitkb kb delete", "NAME"),
    "agent_assign": ("gitkb agent assign", "AGENT_ID KB..."),
}
_NAMES = "|".join(sorted(map(re.escape, COMMANDS), key=len, reverse=True))
# ``name(args)`` (a call, as the MCP/library hints write it), or ``[document_index] NAME [(params)]``
_CALL = re.compile(rf"\b(?:document_index\s+)?({_NAMES})\b(?:\(([^()]*)\)|\s+\((\w+(?:,\s*\w+)*)\))?")
_CLI_ASIDE = re.compile(
    r"\s*\(CLI: [^()]*\)"
)  # "(CLI: gitkb ...)" already says it: redundant once translated


def _args(raw: str) -> str:
    """``'kb', 'a.md', search=...`` → ``kb a.md --search ...``."""
    out = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if eq and key.isidentifier():
            out.append(f"--{key.replace('_', '-')} {value.strip().strip(chr(39))}")
        else:
            v = part.strip("'\"")
            out.append(f"'{v}'" if " " in v else v)
    return " ".join(out)


def _command(m: re.Match[str]) -> str:
    command, placeholders = COMMANDS[m.group(1)]
    call_args = m.group(2)
    args = _args(call_args) if call_args is not None else placeholders
    return f"`{command}{' ' + args if args else ''}`"


def cli_words(text: str) -> str:
    """A library sentence with its action and method names as CLI commands."""
    if not _CALL.search(text):
        return text
    return _CLI_ASIDE.sub("", _CALL.sub(_command, text))
