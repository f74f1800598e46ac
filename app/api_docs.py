"""/docs and /redoc from files inside installed packages, so API docs work offline; and the
item input schema as an OpenAPI component, so a generated client can build items.

FastAPI's defaults load Swagger UI and ReDoc from a CDN: a machine without internet gets a blank
page. The assets come from fastapi-offline's package data (Swagger UI 5, which reads OpenAPI
3.1; MIT, with the upstream Apache-2.0/MIT licences inside); its code is not used.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ITEM_INPUT = "ItemInput"
ITEM_INPUT_REF = f"#/components/schemas/{ITEM_INPUT}"
# suli.validate's model names -> the component names a client sees.
_INPUT_NAMES = {"ItemIn": ITEM_INPUT, "StationIn": "StationInput"}
ASSETS_URL = "/docs-assets"
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def item_input_schemas() -> dict[str, Any]:
    """The components of one item as POST /api/v1/items takes it: suli.validate's own model
    (what `suli index` checks), so the documented item and the validated one are the same."""
    from pydantic import TypeAdapter

    from suli.validate import ItemIn

    schema = TypeAdapter(ItemIn).json_schema(
        mode="validation", ref_template="#/components/schemas/{model}"
    )
    defs: dict[str, Any] = schema.pop("$defs", {})
    out = {"ItemIn": schema, **defs}
    text = json.dumps(out)
    for old, new in _INPUT_NAMES.items():
        text = text.replace(f'"#/components/schemas/{old}"', f'"#/components/schemas/{new}"')
    renamed = json.loads(text)
    for name in renamed.values():
        name.pop("title", None)
    out = {_INPUT_NAMES.get(k, k): v for k, v in renamed.items()}
    props = out[ITEM_INPUT]["properties"]
    # The item's enums as named types too (a generator would call them ItemInputOutcomeType0).
    for prop, name in (("kind", "ItemKind"), ("outcome", "Outcome")):
        field = props[prop]
        choices = [c for c in field.get("anyOf", [field]) if "enum" in c]
        out[name] = {"type": "string", "enum": choices[0]["enum"]}
        ref = {"$ref": f"#/components/schemas/{name}"}
        if "anyOf" in field:
            field["anyOf"] = [ref if "enum" in c else c for c in field["anyOf"]]
        else:
            props[prop] = {**ref, **({"default": field["default"]} if "default" in field else {})}
    return out


def _with_item_input(app: FastAPI) -> None:
    """app.openapi(), plus the ItemInput components the ingestion body refers to."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = default()
            spec.setdefault("components", {}).setdefault("schemas", {}).update(item_input_schemas())
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI) -> None:
    """Serve /docs and /redoc with local asset URLs (create the app with docs_url=None)."""
    _with_item_input(app)
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
