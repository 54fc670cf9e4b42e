"""The registry's HTTP listeners (aiohttp): Confluent's REST API v1 routes and error bodies.

Every answer is JSON with ``Content-Type: application/vnd.schemaregistry.v1+json``; an error is
``{"error_code": <Confluent's code>, "message": "..."}`` with the HTTP status Confluent uses,
which is what its clients (Java, confluent-kafka's Python, Go and .NET clients, the Node
client) parse. A body over ``MAX_BODY_BYTES`` gets 413 before it is read.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from tidelog.broker.schema_registry.errors import RegistryError
from tidelog.broker.schema_registry.registry import SchemaRegistry

__all__ = ("MAX_BODY_BYTES", "CONTENT_TYPE", "make_app")

log = logging.getLogger("tidelog.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: Largest request body read (a schema with its JSON envelope).
MAX_BODY_BYTES = 16 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticate = Callable[[str, str], bool]


def _answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        content_type="application/vnd.schemaregistry.v1+json",
        charset="utf-8",
    )


def _error(status: int, code: int, message: str) -> web.Response:
    return _answer({"error_code": code, "message": message}, status)


async def _body(request: web.Request) -> Mapping[str, Any]:
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise RegistryError(413, 413, f"Request body over {MAX_BODY_BYTES} bytes")
    raw = await request.read()
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        raise RegistryError(400, 400, f"Unrecognized JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise RegistryError(400, 400, "The request body must be a JSON object")
    return body


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise RegistryError.schema_not_found() from None


def _subject(request: web.Request) -> str:
    return request.match_info["subject"]


def make_app(registry: SchemaRegistry, authenticate: Authenticate | None = None) -> web.Application:
    r = registry

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if authenticate is not None and not _authorized(request, authenticate):
            response = _error(401, 401, "Unauthorized: send HTTP basic credentials of a user")
            response.headers["WWW-Authenticate"] = 'Basic realm="tidelog schema registry"'
            return response
        try:
            return await handler(request)
        except RegistryError as exc:
            return _error(exc.status, exc.code, exc.message)
        except web.HTTPRequestEntityTooLarge:
            return _error(413, 413, f"Request body over {MAX_BODY_BYTES} bytes")
        except web.HTTPNotFound:
            return _error(404, 404, "HTTP 404 Not Found")
        except web.HTTPMethodNotAllowed:
            return _error(405, 405, "HTTP 405 Method Not Allowed")
        except web.HTTPException:
            raise
        except Exception:
            log.exception("schema registry request %s %s failed", request.method, request.path)
            return _error(500, 50001, "Error in the backend data store: see the broker's log")

    app = web.Application(middlewares=[errors], client_max_size=MAX_BODY_BYTES)

    def q(request: web.Request) -> Mapping[str, str]:
        return request.query

    async def root(request: web.Request) -> web.Response:
        return _answer({})

    async def types(request: web.Request) -> web.Response:
        return _answer(r.schema_types())

    async def contexts(request: web.Request) -> web.Response:
        return _answer(["."])

    async def schemas(request: web.Request) -> web.Response:
        return _answer(r.list_schemas(q(request)))

    async def by_id(request: web.Request) -> web.Response:
        return _answer(r.schema_by_id(_schema_id(request), q(request)))

    async def raw_by_id(request: web.Request) -> web.Response:
        text = r.raw_schema_by_id(_schema_id(request), q(request))
        return web.Response(text=text, content_type="application/vnd.schemaregistry.v1+json")

    async def id_subjects(request: web.Request) -> web.Response:
        return _answer(r.subjects_of_id(_schema_id(request), q(request)))

    async def id_versions(request: web.Request) -> web.Response:
        return _answer(r.versions_of_id(_schema_id(request), q(request)))

    async def subjects(request: web.Request) -> web.Response:
        return _answer(r.subjects(q(request)))

    async def versions(request: web.Request) -> web.Response:
        return _answer(r.versions(_subject(request), q(request)))

    async def register(request: web.Request) -> web.Response:
        body = await _body(request)
        return _answer(await r.register(_subject(request), body, q(request)))

    async def lookup(request: web.Request) -> web.Response:
        body = await _body(request)
        return _answer(await r.lookup(_subject(request), body, q(request)))

    async def delete_subject(request: web.Request) -> web.Response:
        return _answer(await r.delete_subject(_subject(request), q(request)))

    async def version(request: web.Request) -> web.Response:
        return _answer(r.get_version(_subject(request), request.match_info["version"], q(request)))

    async def raw_version(request: web.Request) -> web.Response:
        text = r.raw_version(_subject(request), request.match_info["version"], q(request))
        return web.Response(text=text, content_type="application/vnd.schemaregistry.v1+json")

    async def referenced_by(request: web.Request) -> web.Response:
        return _answer(r.referenced_by(_subject(request), request.match_info["version"]))

    async def delete_version(request: web.Request) -> web.Response:
        number = await r.delete_version(
            _subject(request), request.match_info["version"], q(request)
        )
        return _answer(number)

    async def check_version(request: web.Request) -> web.Response:
        body = await _body(request)
        version_text = request.match_info["version"]
        return _answer(await r.check(_subject(request), version_text, body, q(request)))

    async def check_all(request: web.Request) -> web.Response:
        body = await _body(request)
        return _answer(await r.check(_subject(request), None, body, q(request)))

    def subject_or_global(request: web.Request) -> str | None:
        return request.match_info.get("subject")

    async def get_config(request: web.Request) -> web.Response:
        return _answer(r.get_config(subject_or_global(request), q(request)))

    async def put_config(request: web.Request) -> web.Response:
        return _answer(await r.set_config(subject_or_global(request), await _body(request)))

    async def delete_config(request: web.Request) -> web.Response:
        return _answer(await r.delete_config(subject_or_global(request)))

    async def get_mode(request: web.Request) -> web.Response:
        return _answer(r.get_mode(subject_or_global(request), q(request)))

    async def put_mode(request: web.Request) -> web.Response:
        body = await _body(request)
        return _answer(await r.set_mode(subject_or_global(request), body, q(request)))

    async def delete_mode(request: web.Request) -> web.Response:
        return _answer(await r.delete_mode(_subject(request)))

    app.add_routes(
        [
            web.get("/", root),
            web.get("/schemas/types", types),
            web.get("/contexts", contexts),
            web.get("/schemas", schemas),
            web.get("/schemas/ids/{id}", by_id),
            web.get("/schemas/ids/{id}/schema", raw_by_id),
            web.get("/schemas/ids/{id}/subjects", id_subjects),
            web.get("/schemas/ids/{id}/versions", id_versions),
            web.get("/subjects", subjects),
            web.get("/subjects/{subject}/versions", versions),
            web.post("/subjects/{subject}/versions", register),
            web.post("/subjects/{subject}", lookup),
            web.delete("/subjects/{subject}", delete_subject),
            web.get("/subjects/{subject}/versions/{version}", version),
            web.get("/subjects/{subject}/versions/{version}/schema", raw_version),
            web.get("/subjects/{subject}/versions/{version}/referencedby", referenced_by),
            web.delete("/subjects/{subject}/versions/{version}", delete_version),
            web.post("/compatibility/subjects/{subject}/versions/{version}", check_version),
            web.post("/compatibility/subjects/{subject}/versions", check_all),
            web.get("/config", get_config),
            web.put("/config", put_config),
            web.delete("/config", delete_config),
            web.get("/config/{subject}", get_config),
            web.put("/config/{subject}", put_config),
            web.delete("/config/{subject}", delete_config),
            web.get("/mode", get_mode),
            web.put("/mode", put_mode),
            web.get("/mode/{subject}", get_mode),
            web.put("/mode/{subject}", put_mode),
            web.delete("/mode/{subject}", delete_mode),
        ]
    )
    return app


def _authorized(request: web.Request, authenticate: Authenticate) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, sep, password = base64.b64decode(token, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return bool(sep) and authenticate(user, password)


async def serve(
    app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None
) -> tuple[web.AppRunner, list[str]]:
    """Start a listener; returns its runner and the addresses it is bound to."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_address=True)
    await site.start()
    scheme = "https" if ssl_context is not None else "http"
    bound = [f"{scheme}://{a[0]}:{a[1]}" for a in runner.addresses if isinstance(a, tuple)]
    return runner, bound
