"""What a ``git`` command line touches: the repository's folder, as ``read`` or ``write``.

Subcommands known to only read (``log``, ``show``, ``diff``, ``status``...; ``branch``/``tag``
when they list; ``remote -v``, ``stash list``...; ``config --get``) read; every other subcommand,
and any one given ``--output``, writes. ``-C``, ``--git-dir`` and ``--work-tree`` move the folder.
No I/O here.
"""

from __future__ import annotations

from gitkb.core.shell_words import positional
from gitkb.core.touches import READ, WRITE, Touch, join_cwd

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


def git_touches(args: list[str], cwd: str) -> list[Touch]:
    """The touches of ``git ARGS`` run in ``cwd``."""
    where = cwd
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt = args[i]
        if opt in GIT_OPTS_WITH_VALUE and i + 1 < len(args):
            if opt in ("-C", "--git-dir", "--work-tree"):
                where = join_cwd(where, args[i + 1])
            i += 2
            continue
        if opt.startswith(("--git-dir=", "--work-tree=")):
            where = join_cwd(where, opt.split("=", 1)[1])
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
        listing = not mutating and (list_flag or not positional(rest))
        return [Touch(READ if listing else WRITE, where, why)]
    if sub in GIT_SUB_READS:
        first = positional(rest)[:1] or [next((a for a in rest if a.startswith("-")), "")]
        return [Touch(READ if first[0] in GIT_SUB_READS[sub] else WRITE, where, why)]
    if sub == "config":
        writing = any(
            a.startswith(("--unset", "--add", "--replace", "--rename", "--remove", "--edit", "-e"))
            for a in rest
        )
        reading = not writing and (
            any(a in ("--get", "--get-all", "--get-regexp", "--list", "-l", "--get-urlmatch") for a in rest)
            or len(positional(rest)) == 1
        )
        return [Touch(READ if reading else WRITE, where, why)]
    return [
        Touch(WRITE, where, why)
    ]  # commit, push, add, rm, mv, reset, checkout, merge, ... and the unknown
