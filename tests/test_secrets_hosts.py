"""Attacks on secrets and hosts (issue 14), through the real HTTP app, the library and the CLI:

* a caller naming where a secret is (``auth.token_env``, ``auth.secrets_file``, ``forge.token_env``)
  or sending a credential to a host it is not bound to: refused, and a local HTTP server that
  records every request receives nothing;
* local-path and ``file://`` sources over HTTP: ``admin`` and inside ``[server] allowed_roots``;
* DNS rebinding: a ``Host`` outside the allowlist is refused on every route, and the web page's
  origin check uses the allowlist, not the request's ``Host``;
* files under the home are 0600 and directories 0700 from creation; the login cookie is a
  session id (``Secure`` over https or behind a trusted proxy only); ``/readyz`` names no path.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitkb.cli.main import cli
from gitkb.core.config import load_settings, parse_credentials
from gitkb.core.errors import InvalidArgument
from gitkb.core.hosts import host_matches
from gitkb.http import create_app
from gitkb.http.ui.session import SESSION_COOKIE
from gitkb.services.changes.sources import credentials as creds
from helpers import SOURCE, Upstream, error_code, error_message, git, with_roots

TOKENS = {
    "writer": "writer-token-0123456789",
    "admin": "admin-token-0123456789",
    "alice": "alice-review-0123456",
}
EVIL = "evil.example:8780"


class Recorder:
    """A local HTTP server on 127.0.0.1 that records every request and answers 401 (asking for
    credentials, so git would send them) -- or redirects elsewhere."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                rec.requests.append({"path": self.path, "authorization": self.headers.get("Authorization")})
                if redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to + self.path)
                else:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")  # so git really would talk to it
    r = Recorder()
    try:
        yield r
    finally:
        r.close()


def toml(roots: Path, extra: str = "") -> str:
    return f"""
[server]
allowed_roots = ["{roots}"]
trusted_proxies = ["10.1.2.3"]

[[server.tokens]]
name = "writer"
token = "{TOKENS["writer"]}"
scopes = ["write"]

[[server.tokens]]
name = "admin"
token = "{TOKENS["admin"]}"
scopes = ["admin"]

[[server.tokens]]
name = "alice"
token = "{TOKENS["alice"]}"
scopes = ["review", "write"]

[[credentials]]
name = "github-docs"
hosts = ["github.com", "api.github.com"]
token_env = "GITKB_TEST_GH_TOKEN"
{extra}
"""


def make_client(
    home: Path,
    text: str,
    client: tuple[str, int] = ("203.0.113.9", 40000),
    base_url: str = "http://testserver",
) -> TestClient:
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(text)
    settings = load_settings(home, embedding_provider="hashing", embedding_model="hashing-384")
    return TestClient(create_app(settings), client=client, base_url=base_url)


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    r = tmp_path / "allowed"
    r.mkdir()
    return r


@pytest.fixture
def secured(home: Path, roots: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("GITKB_TEST_GH_TOKEN", "ghp_" + "GitHubSecret" * 3)
    with make_client(home, toml(roots)) as c:
        yield c


def nothing_registered(c: TestClient, home: Path) -> None:
    listed = c.get("/sources", headers=bearer("admin")).json()
    assert listed["total_count"] == 0, listed
    assert not (home / "repos").exists() or not list((home / "repos").iterdir())


# -- secrets named by a caller, credentials sent to other hosts ------------------------------


def test_a_write_token_cannot_send_a_server_secret_anywhere(
    secured: TestClient, recorder: Recorder, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin token's variable, a server file, the forge's variable: refused, nothing sent."""
    monkeypatch.setenv("GITKB_ADMIN_TOKEN_VALUE", TOKENS["admin"])
    secret_file = home / "stolen.toml"
    secret_file.write_text(f'git_token = "{TOKENS["admin"]}"\n')
    secret_file.chmod(0o600)
    url = recorder.url + "/repo.git"
    bodies = [
        {"name": "x", "url": url, "auth": {"token_env": "GITKB_ADMIN_TOKEN_VALUE"}},
        {"name": "x", "url": url, "auth": {"secrets_file": str(secret_file), "secrets_key": "git_token"}},
        {"name": "x", "url": url, "auth": {"ssh_key": str(secret_file)}},
        {
            "name": "x",
            "url": url,
            "forge": {
                "kind": "github",
                "repo": "o/r",
                "token_env": "GITKB_ADMIN_TOKEN_VALUE",
                "api_url": recorder.url,
            },
        },
        {
            "name": "x",
            "url": url,
            "forge": {
                "kind": "github",
                "repo": "o/r",
                "secrets_file": str(secret_file),
                "api_url": recorder.url,
            },
        },
        {
            "name": "x",
            "url": url,
            "forge": {
                "kind": "github",
                "repo": "o/r",
                "app_id": "1",
                "app_key_env": "GITKB_ADMIN_TOKEN_VALUE",
                "api_url": recorder.url,
            },
        },
    ]
    for body in bodies:  # a write token may not add a source at all (admin) ...
        r = secured.post("/sources", json=body, headers=bearer("writer"))
        assert r.status_code == 403 and error_code(r) == "forbidden", (body, r.text)
        assert TOKENS["admin"] not in r.text
    for body in bodies:  # ... and not even an admin may name where a secret is
        r = secured.post("/sources", json=body, headers=bearer("admin"))
        assert r.status_code == 400 and error_code(r) == "invalid_argument", (body, r.text)
        assert "[[credentials]]" in error_message(r)
        assert TOKENS["admin"] not in r.text
    assert recorder.requests == []
    nothing_registered(secured, home)


def test_a_credential_goes_only_to_its_hosts(secured: TestClient, recorder: Recorder, home: Path) -> None:
    """github-docs is bound to github.com: a source (or forge API) on 127.0.0.1 may not use it."""
    cases = [
        {"name": "x", "url": recorder.url + "/repo.git", "credential": "github-docs"},
        {
            "name": "x",
            "url": recorder.url.replace("127.0.0.1", "localhost") + "/r.git",
            "credential": "github-docs",
        },
        {"name": "x", "url": "https://github.com.evil.example/o/r.git", "credential": "github-docs"},
        {
            "name": "x",
            "url": "https://x-access-token@evil.example/github.com/o/r.git",
            "credential": "github-docs",
        },
        {"name": "x", "url": "git@evil.example:o/r.git", "credential": "github-docs"},
        {
            "name": "x",
            "url": recorder.url + "/repo.git",
            "forge": {"kind": "github", "repo": "o/r", "api_url": recorder.url, "credential": "github-docs"},
        },
        {"name": "x", "url": recorder.url + "/repo.git", "credential": "no-such-credential"},
    ]
    for body in cases:
        r = secured.post("/sources", json=body, headers=bearer("admin"))
        assert r.status_code == 400 and error_code(r) == "invalid_argument", (body, r.text)
    assert recorder.requests == []
    nothing_registered(secured, home)


def test_the_library_and_cli_refuse_the_same(
    home: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb import Workspace

    monkeypatch.setenv("KB_TOKEN", "tok-" + "x" * 20)
    cred = [{"name": "gh", "hosts": ["github.com"], "token_env": "KB_TOKEN"}]
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384", credentials=cred) as ws:
        url = recorder.url + "/repo.git"
        for kw in (
            {"auth": {"token_env": "KB_TOKEN"}},
            {"credential": "gh"},
            {"forge": {"kind": "gitlab", "repo": "g/p", "token_env": "KB_TOKEN"}},
        ):
            out = ws.source_add("x", url, **kw)
            assert out["Success"] is False and out["code"] == "invalid_argument", out
        assert ws.source_list()["total_count"] == 0
    (home / "gitkb.toml").write_text(
        '[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n'
        '[[credentials]]\nname = "gh"\nhosts = ["github.com"]\ntoken_env = "KB_TOKEN"\n'
    )
    for args in (
        ["--token-env", "KB_TOKEN"],
        ["--credential", "gh"],
        ["--forge", "github", "--forge-repo", "o/r", "--forge-token-env", "KB_TOKEN"],
    ):
        r = CliRunner().invoke(cli, ["--home", str(home), "--json", "source", "add", "x", url, *args])
        assert r.exit_code == 1, r.output
        assert json.loads(r.stdout)["code"] == "invalid_argument"
    assert recorder.requests == []


def test_a_bound_credential_is_sent_to_its_host_and_not_through_a_redirect(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The positive case (the token does reach the host it is bound to), and git's redirect to
    another host, which the askpass helper answers with nothing."""
    from gitkb import Workspace

    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    monkeypatch.setenv("KB_TOKEN", "tok-" + "y" * 20)
    other = Recorder()
    first = Recorder(redirect_to=other.url)
    allowed = Recorder()
    try:
        cred = [{"name": "c", "hosts": ["127.0.0.1"], "token_env": "KB_TOKEN"}]
        with Workspace(
            home, embedding_provider="hashing", embedding_model="hashing-384", credentials=cred
        ) as ws:
            assert ws.source_add("ok", allowed.url + "/repo.git", credential="c")["Success"] is False
            assert any(r["authorization"] for r in allowed.requests), allowed.requests  # git got the token
            out = ws.source_add("redirected", first.url + "/repo.git", credential="c")
            assert out["Success"] is False and "tok-" not in json.dumps(out)
        assert first.requests and other.requests  # git followed the redirect ...
        assert not any(r["authorization"] for r in first.requests + other.requests)  # ... with no token
    finally:
        for r in (other, first, allowed):
            r.close()


def test_legacy_references_work_only_through_a_matching_admin_credential() -> None:
    settings = load_settings(
        "/nonexistent-gitkb-home",
        credentials=[{"name": "old", "hosts": ["github.com", "api.github.com"], "token_env": "OLD_VAR"}],
    )
    url = "https://github.com/o/r.git"
    assert creds.git_credential(settings, {"auth": {"token_env": "OLD_VAR"}}, url).name == "old"  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument, match=r"\[\[credentials\]\]"):
        creds.git_credential(settings, {"auth": {"token_env": "OTHER_VAR"}}, url)
    with pytest.raises(InvalidArgument, match="evil.example"):
        creds.git_credential(settings, {"auth": {"token_env": "OLD_VAR"}}, "https://evil.example/o/r.git")
    assert creds.git_credential(settings, {"auth": {"token_env": "OLD_VAR"}}, "/srv/local/repo") is None
    with pytest.raises(InvalidArgument):  # forge: same rule, on the api_url host
        creds.forge_credential(
            settings, {"forge": {"kind": "github", "token_env": "OLD_VAR", "api_url": "https://evil.example"}}
        )
    assert (
        creds.forge_credential(settings, {"forge": {"kind": "github", "token_env": "OLD_VAR"}}).name == "old"
    )


def test_credentials_config_is_checked() -> None:
    for bad in (
        [{"name": "a", "token_env": "X"}],
        [{"name": "a", "hosts": [], "token_env": "X"}],
        [{"name": "a", "hosts": ["h"]}],
        [{"name": "a", "hosts": ["h/x"], "token_env": "X"}],
        [{"name": "a", "hosts": ["h"], "token_env": "X", "token": "literal"}],
        [{"name": "a", "hosts": ["h"], "token_env": "X"}, {"name": "a", "hosts": ["h"], "token_env": "Y"}],
    ):
        with pytest.raises(InvalidArgument):
            parse_credentials(bad)


# -- local-path and file:// sources over HTTP ------------------------------------------------


def test_local_sources_over_http_are_admin_and_inside_allowed_roots(
    secured: TestClient, home: Path, roots: Path, upstream: Upstream, tmp_path: Path
) -> None:
    outside = str(upstream.remote)  # a real repository outside allowed_roots
    link = roots / "link.git"
    link.symlink_to(upstream.remote)
    refused = [
        ("writer", outside, 403),
        ("writer", str(link), 403),
        ("writer", "file://" + outside, 403),
        ("admin", outside, 403),
        ("admin", "file://" + outside, 403),
        ("admin", "FILE://" + outside, 403),
        ("admin", str(link), 403),  # a symlink inside the root to a repository outside
        ("admin", str(roots) + "/../" + upstream.remote.name, 403),
        ("admin", "file://" + str(roots) + "/%2e%2e/" + upstream.remote.name, 403),
        ("admin", "file://localhost" + outside, 403),
        ("admin", "../remote.git", 400),  # relative: resolved against the server's cwd
        ("admin", "file://otherhost" + outside, 400),
        ("admin", "ext::sh -c touch% /tmp/pwned", 400),
        ("admin", "fd::3", 400),
    ]
    for who, url, status in refused:
        r = secured.post("/sources", json={"name": "x", "url": url}, headers=bearer(who))
        assert r.status_code == status, (who, url, r.text)
    nothing_registered(secured, home)
    inside = roots / "kb.git"
    git(tmp_path, "clone", "-q", "--bare", str(upstream.remote), str(inside))
    assert (
        secured.post("/sources", json={"name": "x", "url": str(inside)}, headers=bearer("writer")).status_code
        == 403
    )
    r = secured.post("/sources", json={"name": "x", "url": str(inside)}, headers=bearer("admin"))
    assert r.status_code == 200, r.text


def test_local_sources_need_allowed_roots_even_without_tokens(home: Path, upstream: Upstream) -> None:
    with make_client(home, "", client=("127.0.0.1", 5000)) as c:
        r = c.post("/sources", json={"name": "x", "url": str(upstream.remote)})
        assert r.status_code == 403 and error_code(r) == "forbidden" and "allowed_roots" in r.text
        assert c.get("/sources").json()["total_count"] == 0


# -- the Host allowlist and DNS rebinding ----------------------------------------------------


@pytest.mark.parametrize(
    "host,ok",
    [
        ("localhost:8780", True),
        ("LOCALHOST", True),
        ("127.0.0.1:1", True),
        ("[::1]:8780", True),
        ("localhost.", True),
        ("kb.example.com", True),
        ("kb.example.com:443", True),
        ("a.internal", True),
        (EVIL, False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io", False),
        ("localhost@evil.example", False),
        ("localhost:8780/x", False),
        ("", False),
        ("internal", False),
        ("kb.example.com.evil.example", False),
        ("127.0.0.1:99999", False),
        ("local%68ost", False),
    ],
)
def test_host_matching(host: str, ok: bool) -> None:
    allowed = ("localhost", "127.0.0.1", "[::1]", "kb.example.com", "*.internal")
    assert host_matches(host, allowed) is ok


def test_a_foreign_host_is_refused_on_every_route(secured: TestClient, home: Path) -> None:
    calls = [
        ("get", "/indexes", None),
        ("post", "/indexes", {"index_name": "kb"}),
        ("get", "/healthz", None),
        ("get", "/readyz", None),
        ("post", "/webhooks/generic", {"source": "x", "commit": "0" * 40}),
        ("get", "/ui", None),
        ("get", "/ui/reviews", None),
        ("get", "/ui/login", None),
        ("get", "/openapi.json", None),
        ("post", "/sources", {"name": "x", "url": "https://github.com/o/r.git"}),
    ]
    for host in (EVIL, "127.0.0.1.nip.io:8780", "LOCALHOST.evil.example"):
        for method, path, body in calls:
            r = getattr(secured, method)(
                path, headers={**bearer("admin"), "Host": host}, **({"json": body} if body else {})
            )
            assert r.status_code == 403 and error_code(r) == "forbidden", (host, path, r.text)
    listed = secured.post("/actions/document_index", json={"action": "LIST_INDICES"}, headers=bearer("admin"))
    assert "kb" not in json.dumps(listed.json()), listed.text
    nothing_registered(secured, home)
    assert secured.get("/healthz", headers={"Host": "localhost:8780"}).status_code == 200


def test_public_host_and_allowed_hosts_are_answered(home: Path, roots: Path) -> None:
    extra = ""
    text = toml(roots, extra).replace(
        "[server]\n", '[server]\npublic_host = "kb.example.com"\nallowed_hosts = ["*.corp.example"]\n'
    )
    with make_client(home, text) as c:
        for host in ("kb.example.com", "kb.example.com:443", "docs.corp.example:8780"):
            assert c.get("/healthz", headers={"Host": host}).status_code == 200, host
        assert c.get("/healthz", headers={"Host": "corp.example"}).status_code == 403


def seed_review(c: TestClient, remote: Path) -> str:
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    assert ws.source_add(SOURCE, str(remote))["Success"]
    assert ws.source_sync(SOURCE)["Success"]
    staged = ws.propose_kb_edit(
        SOURCE,
        "docs/runbooks/rotate-api-keys.md",
        search="expire every 90 days",
        replace="expire every 60 days",
    )
    assert staged["Success"], staged
    pr = ws.open_kb_pull_request(SOURCE, title="Rotate keys every 60 days")
    assert pr["review_state"] == "pending", pr
    return str(pr["review_id"])


def csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert m, "no CSRF token in the page"
    return m.group(1)


def test_dns_rebinding_cannot_read_the_page_or_approve(home: Path, upstream: Upstream) -> None:
    """No token configured: the page is open to loopback. A site whose name now resolves to
    127.0.0.1 sends its own Host and Origin: refused at the GET and at the POST."""
    with make_client(home, with_roots("", upstream.remote), client=("127.0.0.1", 50000)) as c:
        rid = seed_review(c, upstream.remote)
        evil = {"Host": EVIL, "Origin": f"http://{EVIL}"}
        page = c.get("/ui/reviews", headers=evil)
        assert page.status_code == 403 and 'name="csrf_token"' not in page.text
        token = csrf(c.get("/ui/reviews").text)  # even with a token obtained somehow
        r = c.post(
            f"/ui/reviews/{rid}/approve", data={"csrf_token": token}, headers=evil, follow_redirects=False
        )
        assert r.status_code == 403
        # an allowed Host with the attacker's Origin: the origin check uses the allowlist
        r = c.post(
            f"/ui/reviews/{rid}/approve",
            data={"csrf_token": token},
            headers={"Host": "127.0.0.1:8780", "Origin": f"http://{EVIL}"},
            follow_redirects=False,
        )
        assert r.status_code == 403
        ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
        assert ws.show_review(rid)["review_state"] == "pending"
        assert upstream.remote_sha("gitkb/proposals/handbook") is None  # nothing pushed
        ok = c.post(
            f"/ui/reviews/{rid}/approve",
            data={"csrf_token": token},
            headers={"Host": "127.0.0.1:8780", "Origin": "http://127.0.0.1:8780"},
            follow_redirects=False,
        )
        assert ok.status_code == 303, ok.text


# -- the login cookie ------------------------------------------------------------------------


def login(c: TestClient, who: str, **headers: str) -> Any:
    page = c.get("/ui/login", headers=headers)
    nonce = page.cookies.get("gitkb_csrf")  # sent back by hand: a Secure cookie is kept from plain http
    extra = {"Cookie": f"gitkb_csrf={nonce}"} if nonce else {}
    r = c.post(
        "/ui/login",
        data={"token": TOKENS[who], "csrf_token": csrf(page.text), "next": "/ui"},
        headers={**headers, **extra},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    return r


def session_cookie_header(r: Any) -> str:
    [cookie] = [
        v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith(SESSION_COOKIE + "=")
    ]
    return str(cookie)


def test_the_cookie_is_a_session_id_and_logout_ends_it(secured: TestClient) -> None:
    r = login(secured, "alice")
    cookie = session_cookie_header(r)
    value = secured.cookies.get(SESSION_COOKIE)
    assert value and TOKENS["alice"] not in cookie and value != TOKENS["alice"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Secure" not in cookie
    db = secured.app.state.gitkb.workspace.ctx.catalog.conn  # type: ignore[attr-defined]
    stored = json.dumps([tuple(row) for row in db.execute("SELECT * FROM ui_sessions")])
    assert value not in stored and TOKENS["alice"] not in stored
    assert secured.get("/ui/reviews", follow_redirects=False).status_code == 200
    secured.post("/ui/logout", data={"csrf_token": csrf(secured.get("/ui").text)}, follow_redirects=False)
    assert db.execute("SELECT count(*) FROM ui_sessions").fetchone()[0] == 0
    for stale in (value, TOKENS["alice"]):  # a cookie copied before logout; the raw token
        r = secured.get(
            "/ui/reviews", headers={"Cookie": f"{SESSION_COOKIE}={stale}"}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")


def test_secure_only_over_https_or_from_a_trusted_proxy(home: Path, roots: Path) -> None:
    text = toml(roots)
    with make_client(home, text, client=("203.0.113.9", 40000)) as c:  # not a trusted proxy
        r = login(c, "alice", **{"X-Forwarded-Proto": "https"})
        assert "Secure" not in session_cookie_header(r)
    with make_client(home, text, client=("10.1.2.3", 40000)) as c:  # the trusted proxy
        r = login(c, "alice", **{"X-Forwarded-Proto": "https"})
        assert "Secure" in session_cookie_header(r)
        c.cookies.clear()
        r = login(c, "alice")  # the proxy spoke plain http
        assert "Secure" not in session_cookie_header(r)
    with make_client(home.parent / "ws-https", text, base_url="https://testserver") as c:
        r = login(c, "alice")
        assert "Secure" in session_cookie_header(r)


# -- file modes and /readyz ------------------------------------------------------------------


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_files_under_the_home_are_private_from_creation(tmp_path: Path, upstream: Upstream) -> None:
    old_umask = os.umask(0o022)  # the usual umask: what gitkb creates must not depend on a stricter one
    home = tmp_path / "fresh" / "ws"
    try:
        check_private_home(home, upstream)
    finally:
        os.umask(old_umask)


def check_private_home(home: Path, upstream: Upstream) -> None:
    from gitkb import Workspace
    from gitkb.http.discovery import write_record
    from gitkb.http.ui.session import load_secret
    from gitkb.workspace.base import internal_error_response

    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as ws:
        assert ws.document_index("CREATE_INDEX", index_name="kb")["Success"]
        assert ws.source_add(SOURCE, str(upstream.remote))["Success"]
        write_record(home, "http://127.0.0.1:1", auth=False, writer=True)
        load_secret(home)
        internal_error_response(home, RuntimeError("boom"))
        assert mode(home) == 0o700 and mode(home / "repos") == 0o700 and mode(home / "logs") == 0o700
        files = [
            "catalog.sqlite3",
            "catalog.sqlite3-wal",
            "catalog.sqlite3-shm",
            "writer.lock",
            "server.json",
            "ui-secret",
            "logs/gitkb.log",
        ]
        for name in files:
            assert mode(home / name) == 0o600, (name, oct(mode(home / name)))
        [token] = list((home / "repos").glob("*/gitkb/writer-token"))
        assert mode(token) == 0o600


def test_readyz_names_no_path(secured: TestClient, home: Path) -> None:
    r = secured.get("/readyz")
    assert r.status_code == 200
    assert str(home) not in r.text and "/" not in json.dumps(r.json()["checks"]), r.text


def test_the_address_the_connection_reached_is_answered() -> None:
    """``gitkb serve --host 10.0.0.5``: Host 10.0.0.5:8780 (an IP literal, which no DNS name can
    rebind) is the server's own origin; another address or a name is still refused."""
    import asyncio

    from gitkb.http.config import ServerConfig
    from gitkb.http.hosts import HostGate

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def status(host: str) -> int:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "GET",
            "path": "/" + host,
            "headers": [(b"host", host.encode())],
            "server": ("10.0.0.5", 8780),
            "client": ("10.0.0.9", 5000),
            "query_string": b"",
        }
        await HostGate(app, ServerConfig())(scope, receive, send)
        return int(sent[0]["status"])

    assert asyncio.run(status("10.0.0.5:8780")) == 200
    assert asyncio.run(status("10.0.0.6:8780")) == 403
    assert asyncio.run(status("kb.example.com:8780")) == 403
    assert reached == ["/10.0.0.5:8780"]


def test_a_catalog_made_readable_by_an_older_gitkb_is_tightened(tmp_path: Path) -> None:
    from gitkb import Workspace

    home = tmp_path / "old"
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384"):
        pass
    for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
        if (home / name).exists():
            (home / name).chmod(0o644)
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384"):
        for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
            assert mode(home / name) == 0o600, name
