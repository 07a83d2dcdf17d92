"""The FastAPI application: routes, authentication, and every failure as a problem.

``create_app(config)`` makes one worker's app; ``app_from_environment`` is the factory uvicorn
calls in each worker process of ``contextwright serve``. Routes are thin: they read the body
with bounded work, admit the tenant (key, then rate) and hand the call to ``Service`` on its
thread pool. ``/healthz`` and ``/readyz`` need no key; OpenAPI is at ``/docs``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Header, Query
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from contextwright.errors import ContextwrightError, InvalidInputError
from contextwright.manager import ContextManager
from contextwright.server.bodies import BuildBody, PrepareBody, RecordBody, read_json
from contextwright.server.config import CONFIG_VARIABLE, ServerConfig
from contextwright.server.problems import (
    BAD_INPUT,
    INTERNAL,
    METHOD,
    NOT_FOUND,
    Json,
    Kind,
    Problem,
    library_problem,
    problem_response,
    unexpected_problem,
)
from contextwright.server.ratelimit import RateLimiter
from contextwright.server.service import Service
from contextwright.session.store import Store

Authorization = Annotated[str | None, Header(description="Bearer <api key>")]
IdempotencyKey = Annotated[str | None, Header(
    alias="Idempotency-Key", description="Names a write: a retry with the same key stores "
    "nothing twice. ASCII only (400 otherwise); send any other key as the body's "
    "idempotency_key.")]
PROBLEM = {"content": {"application/problem+json": {}}, "description": "RFC 9457 problem"}
# The statuses each kind of operation answers with a problem, for the OpenAPI schema: 405 (a
# method the path does not take) and 500 (an unexpected failure) are answered everywhere; 413
# and 415 only where a body is read; 501 (a tokenizer whose package is not installed) where a
# context is built.
ANY_CALL = (405, 500)
SESSION_CALL = (*ANY_CALL, 400, 401, 404, 409, 429, 503)
BODY_CALL = (*SESSION_CALL, 413, 415, 422)
BUILD_CALL = (*BODY_CALL, 501)


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return dict.fromkeys(sorted(statuses), PROBLEM)


def create_app(config: ServerConfig, *, store: Store | None = None,
               manager: ContextManager | None = None,
               limiter: RateLimiter | None = None) -> FastAPI:
    """The service's app for one worker; ``store``, ``manager`` and ``limiter`` may be given."""
    service = Service(config, store=store, manager=manager, limiter=limiter)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    app = FastAPI(title="contextwright", lifespan=lifespan,
                  description="What an LLM agent sees on every call, over HTTP. Every call but "
                  "/healthz and /readyz carries `Authorization: Bearer <api key>`; failures are "
                  "RFC 9457 problem details.")
    app.state.service = service
    app.add_middleware(Utf8PathsOnly)
    _add_problem_handlers(app)
    _add_probes(app, service)
    _add_build(app, service)
    _add_sessions(app, service)
    return app


def app_from_environment() -> FastAPI:
    """The app of one ``contextwright serve`` worker (config: ``CONTEXTWRIGHT_SERVER_CONFIG``)."""
    text = os.environ.get(CONFIG_VARIABLE)
    if not text:
        raise InvalidInputError(f"{CONFIG_VARIABLE} is not set (start with contextwright serve)")
    return create_app(ServerConfig.from_json(text))


def _body_schema(model: type[Any]) -> dict[str, Any]:
    # Bodies are read by ``read_json`` (bounded), not by FastAPI; the schema is only documented.
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


def _add_probes(app: FastAPI, service: Service) -> None:
    @app.get("/healthz", tags=["probes"], responses=_problems(*ANY_CALL))
    async def healthz() -> dict[str, str]:
        """The process serves."""
        return {"status": "ok"}

    @app.get("/metrics", tags=["probes"], response_class=Response,
             responses={200: {"content": {"text/plain": {}},
                              "description": "Prometheus text format"},
                        **_problems(*ANY_CALL, 404)})
    async def metrics() -> Response:
        """The builds' Prometheus metrics (this worker's), when serving with ``--snapshots``."""
        if service.metrics is None:
            raise Problem(NOT_FOUND, "metrics need snapshots: start the service with "
                          "--snapshots URL")
        return Response(service.metrics.exposition(),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/readyz", tags=["probes"], responses=_problems(*ANY_CALL, 503))
    async def readyz() -> dict[str, str]:
        """The store (and the rate limiter's Redis) answer; 503 otherwise."""
        await service.probe_ready(within=5.0)
        return {"status": "ready"}


def _add_build(app: FastAPI, service: Service) -> None:
    build_schema = _body_schema(BuildBody)

    @app.post("/v1/build", tags=["build"], openapi_extra=build_schema,
              responses=_problems(*BUILD_CALL))
    async def build(request: HttpRequest,
                    authorization: Authorization = None) -> JSONResponse:
        """Build one context, stateless: request + plan → the rendering asked for + report."""
        await service.admit(authorization)
        data = await read_json(request, service.limits.max_body_bytes)
        return Json(await service.run(lambda: service.build(data),
                                              within=service.limits.build_timeout))


def _add_sessions(app: FastAPI, service: Service) -> None:
    path = "/v1/sessions/{user_id}/{session_id}"

    @app.post(path + "/prepare", tags=["sessions"], openapi_extra=_body_schema(PrepareBody),
              responses=_problems(*BUILD_CALL))
    async def prepare(user_id: str, session_id: str, request: HttpRequest,
                      authorization: Authorization = None,
                      idempotency_key: IdempotencyKey = None) -> JSONResponse:
        """Append the user's message (if any) and build the session's context."""
        tenant = await service.admit(authorization)
        key = ascii_header_key(idempotency_key)
        data = await read_json(request, service.limits.max_body_bytes)
        return Json(await service.run(
            lambda: service.prepare(tenant, user_id, session_id, data, key),
            within=service.limits.build_timeout))

    @app.post(path + "/record", tags=["sessions"], openapi_extra=_body_schema(RecordBody),
              responses=_problems(*BODY_CALL))
    async def record(user_id: str, session_id: str, request: HttpRequest,
                     authorization: Authorization = None,
                     idempotency_key: IdempotencyKey = None) -> JSONResponse:
        """Append the model's answer and tool results atomically; the seqs stored."""
        tenant = await service.admit(authorization)
        key = ascii_header_key(idempotency_key)
        data = await read_json(request, service.limits.max_body_bytes)
        return Json(await service.run(
            lambda: service.record(tenant, user_id, session_id, data, key)))

    @app.get(path, tags=["sessions"], responses=_problems(*SESSION_CALL))
    async def session(user_id: str, session_id: str, authorization: Authorization = None,
                      last: Annotated[int, Query(ge=0, le=1000)] = 20) -> JSONResponse:
        """The session's state (mode, summary, zones) and its newest ``last`` messages."""
        tenant = await service.admit(authorization)
        return Json(await service.run(
            lambda: service.session(tenant, user_id, session_id, last)))

    @app.delete(path, tags=["sessions"], status_code=204, responses=_problems(*SESSION_CALL))
    async def erase_session(user_id: str, session_id: str,
                            authorization: Authorization = None) -> Response:
        """Erase the session (messages, summary, zones, mode); 404 if there was none."""
        tenant = await service.admit(authorization)
        await service.run(lambda: service.erase_session(tenant, user_id, session_id))
        return Response(status_code=204)

    @app.delete("/v1/users/{user_id}", tags=["sessions"], responses=_problems(*SESSION_CALL))
    async def erase_user(user_id: str, authorization: Authorization = None) -> JSONResponse:
        """Erase every session of the user; how many there were."""
        tenant = await service.admit(authorization)
        return Json(await service.run(lambda: service.erase_user(tenant, user_id)))


def ascii_header_key(value: str | None) -> str | None:
    """The ``Idempotency-Key`` header's key; ``InvalidInputError`` unless it is ASCII.

    Header values are bytes in no stated encoding (curl sends a terminal's UTF-8, Python's
    ``requests`` Latin-1) and the server reads them as Latin-1, so a non-ASCII key would be
    other text than the same key sent in the body's ``idempotency_key`` (JSON: UTF-8 always),
    and a retry would store the message again. The Idempotency-Key draft makes the value a
    structured-field string, which is ASCII; any other key goes in the body.
    """
    if value is not None and not value.isascii():
        raise InvalidInputError("the Idempotency-Key header must be ASCII: send a key with "
                                "other characters as the body's idempotency_key")
    return value


class Utf8PathsOnly:
    """Refuse (400) a URL path that is not UTF-8 once percent-decoded, before any route runs.

    The ASGI server decodes the path with replacement characters, so ``%FF``, ``%FE`` and
    ``%C0`` would all arrive as the one id U+FFFD and name one session between them. The raw
    path still has the bytes sent; an id that is not UTF-8 is refused as the store refuses one
    with a lone surrogate.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the 400 for a path that is not UTF-8; pass every other call on."""
        if scope["type"] == "http" and not _is_utf8_path(scope.get("raw_path")):
            response = problem_response(BAD_INPUT, "the URL path is not UTF-8 once "
                                        "percent-decoded: user and session ids are UTF-8 text")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _is_utf8_path(raw_path: object) -> bool:
    if not isinstance(raw_path, bytes):  # a server that keeps no raw path: nothing to check
        return True
    try:
        unquote_to_bytes(raw_path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_HTTP_KINDS = {404: NOT_FOUND, 405: METHOD}


def _allowed_methods(request: HttpRequest) -> str:
    """Every method a route of the request's path takes, for ``Allow``.

    Starlette names only the methods of the first route matching the path, and a session's
    path has two (``GET`` and ``DELETE``).
    """
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods and (
                route.matches(request.scope)[0] is not Match.NONE):
            methods |= route.methods
    return ", ".join(sorted(methods))


def _add_problem_handlers(app: FastAPI) -> None:
    async def on_problem(_: HttpRequest, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Problem)
        headers = {"WWW-Authenticate": "Bearer"} if exc.kind.status == 401 else {}
        response = problem_response(exc.kind, exc.detail, retry_after=exc.retry_after,
                                    **exc.extensions)
        response.headers.update(headers)
        return response

    async def on_library_error(_: HttpRequest, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ContextwrightError)
        return library_problem(exc)

    async def on_validation(_: HttpRequest, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        where = "; ".join(".".join(str(p) for p in error["loc"]) + ": " + error["msg"]
                          for error in list(exc.errors())[:5])
        return problem_response(BAD_INPUT, f"invalid request: {where}")

    async def on_http(request: HttpRequest, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kind = _HTTP_KINDS.get(exc.status_code) or Kind(
            status=exc.status_code, slug="http-" + str(exc.status_code), title="HTTP error")
        response = problem_response(kind, kind.title if kind.status != 500 else INTERNAL.title)
        response.headers.update(exc.headers or {})
        if exc.status_code == METHOD.status:  # a 405 must say which methods the path takes
            response.headers["Allow"] = _allowed_methods(request)
        return response

    async def on_unexpected(_: HttpRequest, exc: Exception) -> JSONResponse:
        return unexpected_problem(exc)

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(ContextwrightError, on_library_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
