"""The pages ``memgas serve`` shows a browser: ``/ui`` (the inspector), ``/docs`` (Swagger UI) and ``/redoc``
(ReDoc), all served from files in the package (``memgas/service/static``: the inspector's own three files and the
vendored Swagger UI and ReDoc bundles), so they work with no network.

The pages need no key to load; every datum they show comes from the API with the key the user enters (the
inspector keeps it in the tab's ``sessionStorage`` and sends it as a Bearer header: no cookie, so no CSRF). Each
page is sent with a Content-Security-Policy that lets it load and call only this server (the inspector: no
inline script or style at all; Swagger UI and ReDoc style their elements inline, which their policy allows).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["router", "mount_static", "STATIC", "UI_POLICY", "DOCS_POLICY"]

STATIC = Path(__file__).resolve().parent.parent / "static"
#: The inspector's policy: its own scripts and styles, calls to this server only.
UI_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
             "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
#: Swagger UI's and ReDoc's: the same, with the inline styles they set and ReDoc's search worker (a blob).
DOCS_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
               "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; "
               "form-action 'self'; frame-ancestors 'none'")

router = APIRouter(include_in_schema=False)

_SWAGGER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>memgas API</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="static/vendor/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="static/vendor/swagger-ui-bundle.js"></script><script src="static/docs/swagger-init.js"></script>
</body></html>"""

_REDOC = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>memgas API</title><link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><redoc spec-url="openapi.json"></redoc><script src="static/vendor/redoc.standalone.js"></script></body></html>"""


def _page(html: str, policy: str) -> HTMLResponse:
    return HTMLResponse(html, headers={"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff",
                                       "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})


@router.get("/")
def root() -> RedirectResponse:
    """A browser that opens the server's address lands on the inspector."""
    return RedirectResponse("/ui", status_code=307)


@router.get("/ui", response_class=HTMLResponse)
def inspector() -> HTMLResponse:
    """The inspector (see the module docstring)."""
    return _page((STATIC / "ui" / "index.html").read_text(encoding="utf-8"), UI_POLICY)


@router.get("/docs", response_class=HTMLResponse)
def swagger() -> HTMLResponse:
    """Swagger UI on ``/openapi.json``."""
    return _page(_SWAGGER, DOCS_POLICY)


@router.get("/redoc", response_class=HTMLResponse)
def redoc() -> HTMLResponse:
    """ReDoc on ``/openapi.json``."""
    return _page(_REDOC, DOCS_POLICY)


def mount_static(app: FastAPI) -> None:
    """Serve the package's static files at ``/static``."""
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
