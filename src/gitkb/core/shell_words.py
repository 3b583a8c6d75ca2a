"""Shell words: a command line split the way a POSIX shell splits it, and the operands of an argv.

:func:`split_shell` handles quotes, escapes, comments and line continuations and returns words
(quotes removed) and :class:`Op` operators; what the words touch is :mod:`gitkb.core.shell_touches`.
No I/O here.
"""

from __future__ import annotations


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


def is_op(tok: str, ops: set[str]) -> bool:
    """True when ``tok`` is an unquoted operator among ``ops`` (a quoted ``";"`` is a word)."""
    return isinstance(tok, Op) and tok in ops


def positional(args: list[str]) -> list[str]:
    """The operands of ``args``: options dropped, everything after ``--`` kept, ``-`` kept."""
    out, ended = [], False
    for a in args:
        if a == "--" and not ended:
            ended = True
        elif ended or not a.startswith("-") or a == "-":
            out.append(a)
    return out
