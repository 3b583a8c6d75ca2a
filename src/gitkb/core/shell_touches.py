"""What a shell command line touches, classified conservatively.

* reads: ``cat``, ``grep``, ``rg``, ``ls``, ``head``, ``find`` without actions, ``sed`` without
  ``-i``, ``git log/show/diff/status/...`` (:mod:`gitkb.core.git_touches`) and the like touch their
  arguments as ``read``;
* writes: redirects (``>``, ``>>``, ``&>``, ``>|``), ``rm``, ``mv``, ``cp``'s target, ``touch``,
  ``tee``, ``sed -i``, ``git commit/push/add/...`` touch their targets as ``write``;
* anything else -- an unknown program, ``bash script.sh``, ``$(...)``, an unparsable line, a
  path made of variables -- touches the folder it runs in and every argument as ``unknown``.

The line is split by :func:`gitkb.core.shell_words.split_shell`; ``cd`` moves the folder the rest
of the line runs in. No I/O here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from gitkb.core.git_touches import git_touches
from gitkb.core.shell_words import Op, is_op, positional, split_shell
from gitkb.core.touches import READ, UNKNOWN, WRITE, Touch, join_cwd

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


def shell_touches(
    command: str, cwd: str, env: Mapping[str, str] | None = None, depth: int = 0
) -> list[Touch]:
    env = env or {}
    try:
        tokens = split_shell(command)
    except ValueError:
        return [
            Touch(UNKNOWN, cwd, "unparsable shell"),
            *(Touch(UNKNOWN, join_cwd(cwd, w), "unparsable shell") for w in command.split()),
        ]
    if depth > 3 or "$(" in command or "`" in command or "<(" in command or ">(" in command:
        # command substitution / process substitution: what runs is not known from the text
        words = [t for t in tokens if not isinstance(t, Op)]
        return [
            Touch(UNKNOWN, cwd, "command substitution"),
            *(Touch(UNKNOWN, join_cwd(cwd, w), "command substitution") for w in words),
        ]
    out: list[Touch] = []
    segment: list[str] = []
    state = {"cwd": cwd}
    for tok in [*tokens, Op(";")]:
        if is_op(tok, SEPARATORS):
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
        if is_op(tok, WRITE_REDIRECTS | READ_REDIRECTS | {"<<", "<<-"}):
            if words and words[-1].isdigit():
                words.pop()  # the fd number of ``2>``
            if nxt is not None:
                if tok in WRITE_REDIRECTS and not (tok in (">&", ">>&") and (nxt.isdigit() or nxt == "-")):
                    target = _expand(nxt, env)
                    out.append(
                        Touch(WRITE, join_cwd(cwd, target), f"redirect {tok}")
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


def _command(argv: list[str], state: dict[str, str], env: Mapping[str, str], depth: int) -> list[Touch]:
    cwd = state["cwd"]
    name = posixpath.basename(argv[0])
    args = argv[1:]
    pos = positional(args)

    def touch(kind: str, paths: list[str], why: str = name) -> list[Touch]:
        return [Touch(kind, join_cwd(cwd, p), why) for p in paths]

    if name in ("cd", "pushd"):
        target = pos[0] if pos else env.get("HOME", "")
        if target:  # the shell's cd is logical: ``link/..`` is the folder holding the link
            state["cwd"] = posixpath.normpath(join_cwd(cwd, target))
        return []
    if name == "git":
        return git_touches(args, cwd)
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
