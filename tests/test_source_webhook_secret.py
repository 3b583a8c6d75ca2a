"""`gitkb source add --webhook-secret` stores the source's webhook secret, never shows it again."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.stores.catalog import deliveries
from gitkb.stores.catalog import sources as source_rows
from helpers import SOURCE, Upstream


def test_cli_source_add_sets_the_webhook_secret(home: Path, upstream: Upstream) -> None:
    runner = CliRunner()
    r = runner.invoke(
        cli,
        [
            "--home",
            str(home),
            "--json",
            "source",
            "add",
            SOURCE,
            str(upstream.remote),
            "--webhook-secret",
            "hush-123",
        ],
        env={"GITKB_EMBEDDING_PROVIDER": "hashing"},
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["webhook_secret"] == "set"
    listed = runner.invoke(cli, ["--home", str(home), "--json", "source", "list"])
    assert "hush-123" not in listed.output
    with Workspace(home, embedding_provider="hashing") as ws:
        row = source_rows.get_by_name(ws.ctx.catalog.conn, SOURCE)
        assert row is not None
        assert deliveries.get_secret(ws.ctx.catalog.conn, row.id) == "hush-123"
