"""One module per command group; ``register_all`` adds them to the root group."""

from __future__ import annotations

import click


def register_all(group: click.Group) -> None:
    from gitkb.cli.commands import add, agent, docs, embeddings, index, jobs, kb, mcp, search, serve, status
    from gitkb.cli.commands import ask as ask_cmd
    from gitkb.cli.commands import eval as eval_cmd
    from gitkb.cli.commands import init as init_cmd

    for mod in (init_cmd, index, add, docs, search, status, jobs, kb, agent, mcp, serve):
        mod.register(group)
    for mod in (ask_cmd, eval_cmd, embeddings):
        mod.register(group)
    from gitkb.cli.commands import actions, checkout, cite, forge, pr, proposals, review, source, verify

    for mod in (source, proposals, cite, pr, review, forge, actions, checkout, verify):
        mod.register(group)
