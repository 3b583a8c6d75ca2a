"""``/docs`` without a CDN: Swagger UI's files come from the swagger-ui-bundle package."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

STATIC = "/_swagger"


def mount_docs(app: FastAPI) -> None:
    """Serve Swagger UI at /docs from files installed with the package (these machines are offline)."""
    app.mount(STATIC, StaticFiles(directory=swagger_ui_path), name="swagger")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="gitkb API",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon-32x32.png",
        )
