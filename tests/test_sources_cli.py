"""The CLI for sources and proposals: gitkb source|propose|proposals|cite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from gitkb.cli.main import cli
from helpers import Upstream


def gitkb(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)


def as_json(home: Path, *args: str) -> dict[str, Any]:
    res = gitkb(home, "--json", *args)
    return dict(json.loads(res.stdout))


def test_source_and_proposal_commands(tmp_path: Path, upstream: Upstream) -> None:
    home = tmp_path / "ws"
    (tmp_path / "ws").mkdir()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    res = gitkb(home, "source", "add", "handbook", str(upstream.remote), "--exclude", "onboarding/**")
    assert res.exit_code == 0, res.output
    assert "gitkb source sync handbook" in res.output
    res = gitkb(home, "source", "sync", "handbook")
    assert res.exit_code == 0 and "5 added" in res.output, res.output
    listed = gitkb(home, "source", "list")
    assert "handbook" in listed.output and "local" in listed.output

    res = gitkb(
        home,
        "propose",
        "handbook",
        "runbooks/rotate-api-keys.md",
        "--search",
        "every 90 days",
        "--replace",
        "every 60 days",
        "--note",
        "shorter",
    )
    assert res.exit_code == 0 and "+API keys for the payments gateway expire every 60 days." in res.output
    content = tmp_path / "new.md"
    content.write_text("---\ntitle: New\n---\n# New page\n")
    assert gitkb(home, "propose", "handbook", "faq/new.md", "--content-file", str(content)).exit_code == 0
    assert gitkb(home, "propose", "handbook", "policies/data-retention.md", "--delete").exit_code == 0
    res = gitkb(
        home, "propose", "handbook", "runbooks/incident-response.md", "--rename-to", "runbooks/incidents.md"
    )
    assert res.exit_code == 0, res.output
    props = as_json(home, "proposals", "list")["Proposals"]
    assert [p["op"] for p in props] == ["edit", "add", "delete", "rename"]
    shown = gitkb(home, "proposals", "show", props[1]["proposal_id"])
    assert "+# New page" in shown.output
    assert gitkb(home, "proposals", "discard", props[1]["proposal_id"]).exit_code == 0
    assert len(as_json(home, "proposals", "list")["Proposals"]) == 3

    bad = gitkb(home, "propose", "handbook", "../README.md", "--search", "x", "--replace", "y")
    assert bad.exit_code == 1 and "climbs out" in bad.stderr
    usage = gitkb(home, "propose", "handbook", "runbooks/x.md", "--delete", "--search", "x")
    assert usage.exit_code == 2

    hit = as_json(home, "search", "payments gateway rotate", "--top-n", "1")["Results"][0]
    res = gitkb(home, "cite", "check", hit["id"])
    assert res.exit_code == 0 and res.output.startswith("current:"), res.output

    guard = gitkb(home, "docs", "rm", "handbook", "docs/runbooks/rotate-api-keys.md")
    assert guard.exit_code == 1 and "gitkb propose" in guard.stderr  # the hint in CLI words

    assert gitkb(home, "source", "remove", "handbook", "--yes").exit_code == 0
    assert "No sources yet" in gitkb(home, "source", "list").output
