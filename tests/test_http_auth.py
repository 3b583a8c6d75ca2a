"""Bearer tokens and scopes; the open (token-less) API answers loopback only and
`gitkb serve` refuses to bind elsewhere; tokens are compared in constant time."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.core.errors import Forbidden, Unauthorized
from gitkb.http import auth, create_app
from gitkb.http.config import ServerConfig, TokenSpec, load_server_config, token_digest
from helpers import error_code

TOKENS = {
    "reader": "r" * 24,
    "writer": "w" * 24,
    "reviewer": "v" * 24,
    "admin": "a" * 24,
}
TOML = "\n".join(
    f'[[server.tokens]]\nname = "{name}"\ntoken_env = "GITKB_TEST_TOKEN_{name.upper()}"\nscopes = ["{scope}"]\n'
    for name, scope in (("reader", "read"), ("writer", "write"), ("reviewer", "review"), ("admin", "admin"))
)


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def secured(make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> TestClient:
    for name, value in TOKENS.items():
        monkeypatch.setenv(f"GITKB_TEST_TOKEN_{name.upper()}", value)
    return make_client(TOML, peer=("203.0.113.9", 40000))  # a remote peer


def code_of(r: Any) -> str:
    body = r.json()
    assert body["Success"] is False, body
    return error_code(body)


def test_missing_malformed_and_unknown_tokens(secured: TestClient) -> None:
    r = secured.get("/indexes")
    assert r.status_code == 401 and code_of(r) == "unauthorized"
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    for header in ("Basic abc", "Bearer", "Bearer ", "Token " + TOKENS["admin"], "Bearer " + "x" * 24):
        r = secured.get("/indexes", headers={"Authorization": header})
        assert r.status_code == 401 and code_of(r) == "unauthorized", header


def test_each_token_scope_reaches_only_its_action_classes(secured: TestClient) -> None:
    assert secured.get("/indexes", headers=bearer("reader")).status_code == 200
    for who in ("reader", "writer", "reviewer"):  # creating an index is admin: write is content only
        r = secured.post("/indexes", json={"index_name": "kb"}, headers=bearer(who))
        assert r.status_code == 403 and code_of(r) == "forbidden", who
        assert r.json()["details"]["required_class"] == "admin"
    assert secured.post("/indexes", json={"index_name": "kb"}, headers=bearer("admin")).status_code == 200
    # a reviewer reads and reviews but does not write
    assert secured.post("/search", json={"query": "x"}, headers=bearer("reviewer")).status_code == 200
    r = secured.post("/indexes/kb/texts", json={"text": "t"}, headers=bearer("reviewer"))
    assert r.status_code == 403
    # the action API takes its scope from the action
    read_action = {"action": "LIST_INDICES"}
    write_action = {"action": "ADD_TEXT", "index_name": "kb", "text": "t"}
    assert (
        secured.post("/actions/document_index", json=read_action, headers=bearer("reader")).status_code == 200
    )
    assert (
        secured.post("/actions/document_index", json=write_action, headers=bearer("reader")).status_code
        == 403
    )
    assert (
        secured.post("/actions/document_index", json=write_action, headers=bearer("writer")).status_code
        == 200
    )
    # admin holds every scope; knowledge-base creation (admin) refuses a writer
    assert secured.delete("/indexes/kb", headers=bearer("admin")).status_code == 200
    if "post" in secured.get("/openapi.json").json()["paths"].get("/kbs", {}):
        r = secured.post("/kbs", json={"name": "k", "indexes": []}, headers=bearer("writer"))
        assert r.status_code == 403


def test_health_is_open(secured: TestClient) -> None:
    assert secured.get("/healthz").status_code == 200
    assert secured.get("/readyz").status_code == 200


def test_token_scopes_are_classes() -> None:
    """Scopes are the action table's classes; ``write`` keeps its old meaning (read + write + operate)."""
    from gitkb.services.access import principals

    def classes(*scopes: str) -> set[str]:
        return set(principals.token("t", frozenset(scopes)).classes)

    assert classes("read") == {"read"}
    assert classes("write") == {"read", "propose", "write", "operate"}
    assert classes("propose") == {"read", "propose"}
    assert classes("operate") == {"read", "operate"}
    assert classes("review") == {"read", "review"}
    assert classes("admin") == {"read", "propose", "write", "operate", "review", "admin"}
    assert classes("review", "propose") == {"read", "review", "propose"}


def test_every_configured_token_is_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """No early exit: the comparison count (and so the time) is the same whichever token matches."""
    cfg = ServerConfig(
        tokens=tuple(TokenSpec(n, token_digest(v), frozenset({"read"})) for n, v in TOKENS.items())
    )
    calls: list[int] = []
    real = hmac.compare_digest

    def counting(a: Any, b: Any) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    for name in TOKENS:
        calls.clear()
        assert auth.authenticate(cfg, f"Bearer {TOKENS[name]}", "127.0.0.1").name == name
        assert len(calls) == len(TOKENS)
    calls.clear()
    with pytest.raises(Unauthorized):
        auth.authenticate(cfg, "Bearer " + "z" * 24, "127.0.0.1")
    assert len(calls) == len(TOKENS)


def test_open_api_answers_loopback_only(home: Path) -> None:
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    app = create_app(settings)
    with TestClient(app, client=("127.0.0.1", 1)) as c:
        assert c.get("/indexes").status_code == 200
    for peer in ("10.1.2.3", "testclient", "2001:db8::1"):
        with TestClient(app, client=(peer, 1)) as c:
            r = c.get("/indexes")
            assert r.status_code == 401 and code_of(r) == "unauthorized", peer
    with TestClient(app, client=("::1", 1)) as c:
        assert c.get("/indexes").status_code == 200


def test_check_bind() -> None:
    open_cfg = ServerConfig()
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        auth.check_bind(host, open_cfg)
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.com"):
        with pytest.raises(Forbidden):
            auth.check_bind(host, open_cfg)
    secured = ServerConfig(tokens=(TokenSpec("t", token_digest("t" * 20), frozenset({"read"})),))
    auth.check_bind("0.0.0.0", secured)


def test_serve_refuses_a_public_bind_without_tokens(home: Path) -> None:
    from gitkb.cli.main import cli

    result = CliRunner().invoke(cli, ["--home", str(home), "serve", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 1
    assert "refusing to listen on 0.0.0.0" in result.output


def test_tokens_come_from_literal_sha256_or_env_entries(home: Path) -> None:
    home.mkdir()
    digest = token_digest("s" * 20).hex()
    (home / "gitkb.toml").write_text(
        '[[server.tokens]]\nname = "lit"\ntoken = "' + "l" * 20 + '"\nscopes = ["read"]\n'
        '[[server.tokens]]\nname = "hashed"\ntoken_sha256 = "' + digest + '"\nscopes = ["write"]\n'
        '[[server.tokens]]\nname = "env"\ntoken_env = "MY_TOKEN"\nscopes = ["review"]\n'
    )
    cfg = load_server_config(load_settings(home), env={"MY_TOKEN": "e" * 20, "GITKB_WEBHOOK_SECRET": "shh"})
    assert [t.name for t in cfg.tokens] == ["lit", "hashed", "env"]
    assert auth.authenticate(cfg, "Bearer " + "s" * 20, None).name == "hashed"
    assert auth.authenticate(cfg, "bearer " + "e" * 20, None).scopes == {"read", "review"}
    assert cfg.webhook_secret == "shh" and "shh" not in repr(cfg)
