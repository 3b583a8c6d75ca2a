"""What one pending agent tool call touches: the pure half of ``gitkb guard``.

:func:`classify` takes a hook's JSON -- Claude Code's PreToolUse input (``tool_name``,
``tool_input``, ``cwd``) or the plain ``{"tool", "path", "command", "cwd"}`` form -- and returns
the paths the call would read, write, or do something unknown to. A shell command is split the way
a POSIX shell splits it (quotes, escapes, operators; :func:`split_shell`) and classified
conservatively:

* reads: ``cat``, ``grep``, ``rg``, ``ls``, ``head``, ``find`` without actions, ``sed`` without
  ``-i``, ``git log/show/diff/status/...`` and the like touch their arguments as ``read``;
* writes: redirects (``>``, ``>>``, ``&>``, ``>|``), ``rm``, ``mv``, ``cp``'s target, ``touch``,
  ``tee``, ``sed -i``, ``git commit/push/add/...`` (every git subcommand not known to only read)
  touch their targets (for git: the repository's folder) as ``write``;
* anything else -- an unknown program, ``bash script.sh``, ``$(...)``, an unparsable line, a
  path made of variables -- touches the folder it runs in and every argument as ``unknown``.

The guard (``gitkb.services.changes.checkout_guard``) resolves the paths (symlinks, ``..``) and denies a
``write`` or ``unknown`` touch inside a managed checkout. No I/O here.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

READ, WRITE, UNKNOWN = "read", "write", "unknown"


@dataclass(frozen=True)
class Touch:
    kind: str  # read | write | unknown
    path: str  # absolute when the call's cwd is known, else as given
    why: str  # what touches it: "Write", "rm", "redirect >", "git commit", ...


@dataclass(frozen=True)
class ToolCall:
    runtime: str  # "claude" (PreToolUse input) or "plain"
    tool: str
    cwd: str
    touches: tuple[Touch, ...] = field(default_factory=tuple)


# -- file tools ---------------------------------------------------------------

CLAUDE_WRITE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
CLAUDE_READ_TOOLS = {
    "Read": "file_path",
    "NotebookRead": "notebook_path",
    "Grep": "path",
    "Glob": "path",
    "LS": "path",
}
CLAUDE_NO_FILES = {
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "TodoRead",
    "Task",
    "Agent",
    "ExitPlanMode",
    "AskUserQuestion",
    "BashOutput",
    "KillShell",
    "KillBash",
    "Skill",
    "SlashCommand",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
}
SHELL_TOOLS = {
    "bash",
    "shell",
    "sh",
    "exec",
    "run",
    "command",
    "terminal",
    "run_shell_command",
    "local_shell",
}
PLAIN_READ = {
    "read",
    "view",
    "cat",
    "grep",
    "glob",
    "ls",
    "list",
    "search",
    "find",
    "open",
    "read_file",
    "list_dir",
}
PLAIN_WRITE = {
    "write",
    "edit",
    "create",
    "delete",
    "remove",
    "rm",
    "unlink",
    "move",
    "mv",
    "rename",
    "patch",
    "apply_patch",
    "multiedit",
    "append",
    "mkdir",
    "touch",
    "chmod",
    "copy",
    "cp",
    "write_file",
    "edit_file",
    "replace",
    "str_replace",
    "insert",
    "notebookedit",
}
PATH_KEYS = re.compile(r"path|file|dir|folder|cwd|target|dest|source|from|to$", re.IGNORECASE)


def classify(data: Mapping[str, Any], *, default_cwd: str, env: Mapping[str, str] | None = None) -> ToolCall:
    """The touches of one hook input; ``ValueError`` when it is neither form."""
    env = env or {}
    if not isinstance(data, Mapping):
        raise ValueError("the hook input must be a JSON object")
    given_cwd = data.get("cwd")
    cwd: str = given_cwd if isinstance(given_cwd, str) and given_cwd else default_cwd
    if "tool_name" in data:
        name, args = data.get("tool_name"), data.get("tool_input")
        if not isinstance(name, str) or not isinstance(args, Mapping):
            raise ValueError("tool_name must be a string and tool_input an object")
        return ToolCall("claude", name, cwd, tuple(_claude(name, args, cwd, env)))
    if "tool" in data or "command" in data:
        tool = data.get("tool")
        plain: str = tool if isinstance(tool, str) else "shell"
        return ToolCall("plain", plain, cwd, tuple(_plain(plain, data, cwd, env)))
    raise ValueError(
        "expected Claude Code's PreToolUse input (tool_name, tool_input) or {tool, path, command}"
    )


def _join(cwd: str, path: str) -> str:
    return posixpath.join(cwd, path) if cwd else path


def _claude(name: str, args: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> list[Touch]:
    if name.startswith("mcp__") or name in CLAUDE_NO_FILES:
        return []  # MCP tools go through their own servers (gitkb's propose_kb_edit among them)
    if name == "Bash":
        command = args.get("command")
        if not isinstance(command, str):
            return [Touch(UNKNOWN, cwd, "Bash without a command")]
        return shell_touches(command, cwd, env)
    if name in CLAUDE_WRITE_TOOLS:
        return [Touch(WRITE, _join(cwd, str(args.get(CLAUDE_WRITE_TOOLS[name]) or "")), name)]
    if name in CLAUDE_READ_TOOLS:
        return [Touch(READ, _join(cwd, str(args.get(CLAUDE_READ_TOOLS[name]) or "")), name)]
    return _other_tool(name, args, cwd, env)


def _other_tool(name: str, args: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> list[Touch]:
    """Another runtime's tool in the same input shape (``run_shell_command``, ``write_file``...), or one
    we do not know: a ``command`` is classified as shell, every path-like argument is touched as the
    tool's name says (read, write) or in an unknown way."""
    low = name.lower()
    kind = READ if low in PLAIN_READ else WRITE if low in PLAIN_WRITE else UNKNOWN
    out: list[Touch] = []
    if isinstance(args.get("command"), str):
        out.extend(shell_touches(args["command"], _join(cwd, str(args.get("directory") or "")), env))
        if low in SHELL_TOOLS:
            return out
    for key, value in args.items():
        values = value if isinstance(value, list) else [value]
        if PATH_KEYS.search(str(key)):
            out.extend(Touch(kind, _join(cwd, v), name) for v in values if isinstance(v, str) and v)
    return out


def _plain(name: str, data: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> list[Touch]:
    low = name.lower()
    paths = [data.get("path"), *(data.get("paths") or [] if isinstance(data.get("paths"), list) else [])]
    for key in ("new_path", "destination", "to", "target"):
        paths.append(data.get(key))
    given = [p for p in paths if isinstance(p, str) and p]
    out: list[Touch] = []
    command = data.get("command")
    if isinstance(command, str) and (low in SHELL_TOOLS or "path" not in data):
        out.extend(shell_touches(command, cwd, env))
    elif isinstance(command, list) and all(isinstance(c, str) for c in command):
        out.extend(shell_touches(shlex.join(command), cwd, env))  # argv: quoted back into one line
    if low in PLAIN_READ:
        out.extend(Touch(READ, _join(cwd, p), name) for p in given)
    elif low in PLAIN_WRITE:
        out.extend(Touch(WRITE, _join(cwd, p), name) for p in given)
    else:  # an unknown tool, or a path beside a shell command
        out.extend(Touch(UNKNOWN, _join(cwd, p), name) for p in given)
    return out


# -- shell commands -----------------------------------------------------------

SEPARATORS = {";", "&&", "||", "|", "&", "\n", "|&", "(", ")", ";;", "{", "}", "!"}
WRITE_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>", ">&", ">>&"}
READ_REDIRECTS = {"<", "<<<", "<&"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
READ_COMMANDS = {
    "cat",
    "less",
    "more",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "ls",
    "ll",
    "la",
    "tree",
    "wc",
    "file",
    "stat",
    "du",
    "df",
    "diff",
    "cmp",
    "comm",
    "echo",
    "printf",
    "pwd",
    "true",
    "false",
    "test",
    "[",
    "which",
    "type",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "cut",
    "tr",
    "nl",
    "column",
    "jq",
    "bat",
    "fd",
    "cd",
    "pushd",
    "popd",
    "date",
    "whoami",
    "id",
    "env",
    "printenv",
    "sleep",
    "strings",
    "od",
    "xxd",
    "hexdump",
    "zcat",
    "look",
    "fold",
    "fmt",
    "rev",
    "tac",
    "paste",
    "join",
    "expand",
    "unexpand",
    "seq",
    "yes",
    "uname",
    "hostname",
    "exit",
    "set",
    "export",
    "unset",
    "source",
}
TOUCH_ALL = {
    "rm",
    "rmdir",
    "unlink",
    "shred",
    "touch",
    "mkdir",
    "truncate",
    "chmod",
    "chown",
    "chgrp",
    "mv",
    "chattr",
    "setfacl",
    "mkfifo",
    "mknod",
}
TO_LAST = {"cp", "install", "rsync", "ln", "scp"}  # the last argument (or -t DIR) is written
WRAPPERS = {
    "sudo",
    "command",
    "builtin",
    "exec",
    "nice",
    "nohup",
    "time",
    "stdbuf",
    "ionice",
    "doas",
    "chronic",
}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "fish"}
GIT_READS = {
    "log",
    "show",
    "diff",
    "status",
    "blame",
    "annotate",
    "grep",
    "ls-files",
    "ls-tree",
    "ls-remote",
    "cat-file",
    "rev-parse",
    "rev-list",
    "describe",
    "shortlog",
    "whatchanged",
    "show-ref",
    "for-each-ref",
    "name-rev",
    "merge-base",
    "help",
    "version",
    "count-objects",
    "check-ignore",
    "check-attr",
    "var",
    "show-branch",
    "diff-tree",
    "diff-files",
    "diff-index",
    "range-diff",
    "cherry",
    "verify-commit",
    "verify-tag",
    "fsck",
}
GIT_LIST_ONLY = {  # subcommands that only read when given no names and none of these flags
    "branch": {
        "-d",
        "-D",
        "-m",
        "-M",
        "-c",
        "-C",
        "-f",
        "--force",
        "-u",
        "--set-upstream-to",
        "--unset-upstream",
        "--edit-description",
        "--delete",
        "--move",
        "--copy",
        "--track",
        "--no-track",
    },
    "tag": {"-d", "--delete", "-a", "-s", "-f", "-m", "-F", "-u", "--annotate", "--sign", "--force"},
}
GIT_SUB_READS = {
    "remote": {"", "-v", "show", "get-url"},
    "stash": {"list", "show"},
    "worktree": {"list"},
    "notes": {"list", "show"},
    "submodule": {"status", "summary"},
    "reflog": {"", "show"},
}
GIT_OPTS_WITH_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}


class Op(str):
    """An unquoted shell operator (``;``, ``&&``, ``|``, ``>``, ``2>``'s ``>``...), not a word."""


OPERATORS = sorted(
    [
        "&&",
        "||",
        ";;",
        "|&",
        "<<<",
        "<<-",
        "<<",
        ">>&",
        ">>",
        "&>>",
        "&>",
        ">&",
        "<&",
        ">|",
        "<>",
        ";",
        "&",
        "|",
        "<",
        ">",
        "(",
        ")",
        "\n",
    ],
    key=len,
    reverse=True,
)
RESERVED = {"{", "}", "!"}


def split_shell(command: str) -> list[str]:
    """Words (quotes removed) and :class:`Op` operators; ``ValueError`` on an unclosed quote.

    A quoted ``">"`` or ``'|'`` is a word (``grep '|' table.md`` reads), an unquoted one an operator."""
    out: list[str] = []
    word: list[str] = []
    quoted = False
    i, n = 0, len(command)

    def end_word() -> None:
        nonlocal quoted
        if word or quoted:
            text = "".join(word)
            out.append(Op(text) if text in RESERVED and not quoted else text)
        word.clear()
        quoted = False

    while i < n:
        ch = command[i]
        if ch in " \t\r":
            end_word()
            i += 1
        elif ch == "\\":
            if i + 1 < n and command[i + 1] == "\n":
                i += 2  # a line continuation
                continue
            if i + 1 >= n:
                raise ValueError("a backslash ends the line")
            word.append(command[i + 1])
            quoted = True
            i += 2
        elif ch == "'":
            j = command.find("'", i + 1)
            if j < 0:
                raise ValueError("unclosed single quote")
            word.append(command[i + 1 : j])
            quoted, i = True, j + 1
        elif ch == '"':
            i += 1
            while i < n and command[i] != '"':
                if command[i] == "\\" and i + 1 < n and command[i + 1] in '"\\$`\n':
                    i += 1
                word.append(command[i])
                i += 1
            if i >= n:
                raise ValueError("unclosed double quote")
            quoted, i = True, i + 1
        elif ch == "#" and not word and not quoted:
            j = command.find("\n", i)
            i = n if j < 0 else j  # a comment, up to the line's end
        elif ch in ";&|<>()\n":
            end_word()
            op = next(o for o in OPERATORS if command.startswith(o, i))
            out.append(Op(op))
            i += len(op)
        else:
            word.append(ch)
            i += 1
    end_word()
    return out


def _is(tok: str, ops: set[str]) -> bool:
    return isinstance(tok, Op) and tok in ops


def shell_touches(
    command: str, cwd: str, env: Mapping[str, str] | None = None, depth: int = 0
) -> list[Touch]:
    env = env or {}
    try:
        tokens = split_shell(command)
    except ValueError:
        return [
            Touch(UNKNOWN, cwd, "unparsable shell"),
            *(Touch(UNKNOWN, _join(cwd, w), "unparsable shell") for w in command.split()),
        ]
    if depth > 3 or "$(" in command or "`" in command or "<(" in command or ">(" in command:
        # command substitution / process substitution: what runs is not known from the text
        words = [t for t in tokens if not isinstance(t, Op)]
        return [
            Touch(UNKNOWN, cwd, "command substitution"),
            *(Touch(UNKNOWN, _join(cwd, w), "command substitution") for w in words),
        ]
    out: list[Touch] = []
    segment: list[str] = []
    state = {"cwd": cwd}
    for tok in [*tokens, Op(";")]:
        if _is(tok, SEPARATORS):
            if segment:
                out.extend(_segment(segment, state, env, depth))
            segment = []
        else:
            segment.append(tok)
    return out


def _expand(word: str, env: Mapping[str, str]) -> str | None:
    """``~`` and ``$VAR`` from the hook's environment; None when something stays unexpanded."""
    if word == "~" or word.startswith("~/"):
        home = env.get("HOME")
        if not home:
            return None
        word = home + word[1:]
    if "$" in word:
        word = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), "\0"), word)
        if "\0" in word or "$" in word:
            return None
    return word


def _segment(tokens: list[str], state: dict[str, str], env: Mapping[str, str], depth: int) -> list[Touch]:
    cwd = state["cwd"]
    out: list[Touch] = []
    words: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if _is(tok, WRITE_REDIRECTS | READ_REDIRECTS | {"<<", "<<-"}):
            if words and words[-1].isdigit():
                words.pop()  # the fd number of ``2>``
            if nxt is not None:
                if tok in WRITE_REDIRECTS and not (tok in (">&", ">>&") and (nxt.isdigit() or nxt == "-")):
                    target = _expand(nxt, env)
                    out.append(
                        Touch(WRITE, _join(cwd, target), f"redirect {tok}")
                        if target is not None
                        else Touch(UNKNOWN, cwd, f"redirect {tok} to {nxt}")
                    )
                i += 2
                continue
        else:
            words.append(tok)
        i += 1
    while words and ASSIGNMENT.match(words[0]):
        words.pop(0)
    words = _unwrap(words)
    if not words:
        return out
    expanded = [_expand(w, env) for w in words]
    if any(e is None for e in expanded[1:]) or expanded[0] is None:
        kind = READ if posixpath.basename(words[0]) in READ_COMMANDS - {"cd", "pushd"} else UNKNOWN
        if kind == UNKNOWN:
            return [*out, Touch(UNKNOWN, cwd, f"{words[0]} with an unexpanded variable")]
    argv = [e if e is not None else w for e, w in zip(expanded, words, strict=True)]
    return [*out, *_command(argv, state, env, depth)]


def _unwrap(words: list[str]) -> list[str]:
    """Drop ``sudo``/``env``/``nice``/``timeout`` and their options in front of the real command."""
    while words:
        head = posixpath.basename(words[0])
        if head in WRAPPERS or head == "env" and len(words) > 1:
            words = words[1:]
            while words and (words[0].startswith("-") or ASSIGNMENT.match(words[0])):
                takes = words[0] in ("-u", "-g", "-n", "-C", "-o", "-e", "-i") and head != "env"
                words = words[2:] if takes else words[1:]
        elif head == "timeout" and len(words) > 2:
            words = [w for w in words[1:] if not w.startswith("-")][1:]
        else:
            return words
    return words


def _positional(args: list[str]) -> list[str]:
    out, ended = [], False
    for a in args:
        if a == "--" and not ended:
            ended = True
        elif ended or not a.startswith("-") or a == "-":
            out.append(a)
    return out


def _command(argv: list[str], state: dict[str, str], env: Mapping[str, str], depth: int) -> list[Touch]:
    cwd = state["cwd"]
    name = posixpath.basename(argv[0])
    args = argv[1:]
    pos = _positional(args)

    def touch(kind: str, paths: list[str], why: str = name) -> list[Touch]:
        return [Touch(kind, _join(cwd, p), why) for p in paths]

    if name in ("cd", "pushd"):
        target = pos[0] if pos else env.get("HOME", "")
        if target:  # the shell's cd is logical: ``link/..`` is the folder holding the link
            state["cwd"] = posixpath.normpath(_join(cwd, target))
        return []
    if name == "git":
        return _git(args, cwd)
    if name in SHELLS and "-c" in args:
        script = args[args.index("-c") + 1] if args.index("-c") + 1 < len(args) else ""
        return shell_touches(script, cwd, env, depth + 1)
    if name == "eval":
        return shell_touches(" ".join(args), cwd, env, depth + 1)
    if name == "xargs":
        rest = _unwrap([a for a in args if not a.startswith("-")])
        if rest and posixpath.basename(rest[0]) in READ_COMMANDS:
            return []
        return [Touch(UNKNOWN, cwd, f"xargs {' '.join(rest[:1])}")]  # its targets come from stdin
    if name == "sed" or name == "perl":
        in_place = any(a in ("-i", "--in-place") or a.startswith(("-i", "--in-place=")) for a in args)
        if name == "perl" and not in_place:
            return [Touch(UNKNOWN, cwd, name), *touch(UNKNOWN, pos)]
        if in_place:
            return [Touch(WRITE, cwd, f"{name} -i"), *touch(WRITE, pos[1:] or pos, f"{name} -i")]
        script = " ".join(pos[:1])
        if re.search(r"(^|[;}\s])[wW]\s|/w\s", script):
            return touch(UNKNOWN, pos[1:], "sed with a w command") or [Touch(UNKNOWN, cwd, "sed w")]
        return touch(READ, pos[1:])
    if name in ("awk", "gawk", "mawk"):
        prog = pos[0] if pos else ""
        if re.search(r">|\|\s*\"|system\s*\(|getline|fflush", prog):
            return [Touch(UNKNOWN, cwd, name), *touch(UNKNOWN, pos[1:])]
        return touch(READ, pos[1:])
    if name == "find":
        actions = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
        roots = [a for a in args if not a.startswith(("-", "(", ")", "!"))][:1] or ["."]
        if any(a in actions for a in args):
            return touch(
                WRITE if "-delete" in args else UNKNOWN,
                roots,
                "find " + next(a for a in args if a in actions),
            )
        return touch(READ, roots)
    if name == "sort":
        outs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-o"]
        outs += [a.split("=", 1)[1] for a in args if a.startswith("--output=")]
        return touch(WRITE, outs, "sort -o") + touch(READ, pos)
    if name == "uniq":
        return touch(READ, pos[:1]) + touch(WRITE, pos[1:2], "uniq OUTPUT")
    if name == "tee":
        return touch(WRITE, pos)
    if name == "dd":
        return touch(WRITE, [a[3:] for a in args if a.startswith("of=")], "dd of=")
    if name in TOUCH_ALL:
        return touch(WRITE, pos or ["."])
    if name in TO_LAST:
        targets = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "--target-directory")]
        targets += [a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")]
        if not targets and pos:
            targets = pos[-1:]
        return touch(WRITE, targets) + touch(READ, [p for p in pos if p not in targets])
    if name in READ_COMMANDS:
        return touch(READ, pos)
    # an unknown program: the folder it runs in and every argument (option values too)
    values = [a.split("=", 1)[1] for a in args if a.startswith("-") and "=" in a]
    return [Touch(UNKNOWN, cwd, name), *touch(UNKNOWN, pos + values)]


def _git(args: list[str], cwd: str) -> list[Touch]:
    where = cwd
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt = args[i]
        if opt in GIT_OPTS_WITH_VALUE and i + 1 < len(args):
            if opt in ("-C", "--git-dir", "--work-tree"):
                where = _join(where, args[i + 1])
            i += 2
            continue
        if opt.startswith(("--git-dir=", "--work-tree=")):
            where = _join(where, opt.split("=", 1)[1])
        i += 1
    sub = args[i] if i < len(args) else ""
    rest = args[i + 1 :]
    why = f"git {sub}".strip()
    if not sub:
        return []
    if any(a.startswith("--output") for a in rest):
        return [Touch(WRITE, where, f"{why} --output")]
    if sub in GIT_READS:
        return [Touch(READ, where, why)]
    if (
        sub in GIT_LIST_ONLY
    ):  # ``git branch``, ``git tag -l 'v*'`` list; ``git tag v1``, ``git branch -D x`` write
        flags = GIT_LIST_ONLY[sub]
        mutating = any(a in flags or a.split("=")[0] in flags for a in rest)
        list_flag = any(a in ("-l", "--list") for a in rest)
        listing = not mutating and (list_flag or not _positional(rest))
        return [Touch(READ if listing else WRITE, where, why)]
    if sub in GIT_SUB_READS:
        first = _positional(rest)[:1] or [next((a for a in rest if a.startswith("-")), "")]
        return [Touch(READ if first[0] in GIT_SUB_READS[sub] else WRITE, where, why)]
    if sub == "config":
        writing = any(
            a.startswith(("--unset", "--add", "--replace", "--rename", "--remove", "--edit", "-e"))
            for a in rest
        )
        reading = not writing and (
            any(a in ("--get", "--get-all", "--get-regexp", "--list", "-l", "--get-urlmatch") for a in rest)
            or len(_positional(rest)) == 1
        )
        return [Touch(READ if reading else WRITE, where, why)]
    return [
        Touch(WRITE, where, why)
    ]  # commit, push, add, rm, mv, reset, checkout, merge, ... and the unknown
