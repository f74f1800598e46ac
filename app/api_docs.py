"""/docs and /redoc from files inside installed packages, so API docs work offline.

FastAPI's defaults load Swagger UI and ReDoc from a CDN: a machine without internet gets a blank
page. The assets come from fastapi-offline's package data (Swagger UI 5, which reads OpenAPI
3.1; MIT, with the upstream Apache-2.0/MIT licences inside); its code is not used.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def install(app: FastAPI) -> None:
    """Serve /docs and /redoc with local asset URLs (create the app with docs_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    title = app.title

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} - API docs",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
