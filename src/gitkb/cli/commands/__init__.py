"""One module per command group; ``register_all`` adds them to the root group."""

from __future__ import annotations

import click

from gitkb.cli.commands import (
    actions,
    add,
    agent,
    backup,
    checkout,
    cite,
    docs,
    embeddings,
    forge,
    index,
    jobs,
    kb,
    mcp,
    pr,
    proposals,
    review,
    search,
    serve,
    source,
    status,
    verify,
)
from gitkb.cli.commands import ask as ask_cmd
from gitkb.cli.commands import eval as eval_cmd
from gitkb.cli.commands import init as init_cmd


def register_all(group: click.Group) -> None:
    for mod in (init_cmd, index, add, docs, search, status, jobs, kb, agent, mcp, serve):
        mod.register(group)
    for mod in (ask_cmd, eval_cmd, embeddings):
        mod.register(group)

    for mod in (source, proposals, cite, pr, review, forge, actions, checkout, verify, backup):
        mod.register(group)
