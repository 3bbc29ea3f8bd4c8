"""The memory inspector: a static page (``static/``: HTML, CSS, plain JavaScript, no build step)
that the API serves at ``/ui/``.

The files hold no data and need no key. The page asks for an API key, keeps it in the tab's
``sessionStorage`` (gone when the tab closes; never in a URL, a cookie or ``localStorage``) and
sends it as ``Authorization: Bearer`` to the same API routes every client uses, so the key's
tenant and its read-only flag apply exactly as they do to any caller.

Every response carries a strict Content-Security-Policy (scripts and styles from this origin
only, no inline code, API calls to this origin only), and the page builds its DOM with text
nodes only, so stored memory text can never run as code in it.
"""

from __future__ import annotations

from pathlib import Path

from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC_DIR = Path(__file__).with_name("static")

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        (
            b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
    ),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)  # the API's RequestEnvelope adds nosniff and cache-control: no-store to every response


class _WithHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def inspector_app() -> ASGIApp:
    """The ASGI app serving the inspector's files (``index.html`` for the directory)."""
    return _WithHeaders(StaticFiles(directory=STATIC_DIR, html=True))
