"""/docs works offline: Swagger UI's assets come from the installed package, not a CDN."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from gitkb.core.config import load_settings
from gitkb.http.app import create_app


def test_docs_page_uses_local_assets(tmp_path: Path) -> None:
    app = create_app(load_settings(tmp_path / "ws", embedding_provider="hashing"))
    with TestClient(app) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert "cdn" not in page.text.lower() and "/_swagger/swagger-ui-bundle.js" in page.text
        js = client.get("/_swagger/swagger-ui-bundle.js")
        assert js.status_code == 200 and len(js.content) > 100_000
        assert client.get("/openapi.json").json()["info"]["title"] == "gitkb"
