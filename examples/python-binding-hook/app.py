"""A prestart binding hook in Python: FastAPI answers every delivery at once (202, empty body), the
provisioning runs in the background, and the completed event is POSTed to K_SINK or the
request's data.replyTo.

    python app.py

Environment: PORT (8080; 0 picks a free one), HOST (0.0.0.0), HOOK_NAME (provision-db),
PROVISION_MS (3000), K_SINK, LOG_LEVEL (info).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from contract import MAX_REQUEST_BYTES, ContractError, parse_requested
from provisioning import images_line, provision_database
from runner import Runner

log = logging.getLogger("prestart-hook")


@dataclass(frozen=True)
class Settings:
    hook_name: str = "provision-db"
    provision_ms: int = 3000
    sink: str = ""
    host: str = "0.0.0.0"
    port: int = 8080
    log_level: str = "info"

    @staticmethod
    def from_env() -> Settings:
        return Settings(
            hook_name=os.environ.get("HOOK_NAME", "provision-db"),
            provision_ms=int(os.environ.get("PROVISION_MS", "3000")),
            sink=os.environ.get("K_SINK", ""),
            host=os.environ.get("HOST", "0.0.0.0"),
            port=int(os.environ.get("PORT", "8080")),
            log_level=os.environ.get("LOG_LEVEL", "info").lower(),
        )


def refusal(err: ContractError) -> Response:
    return Response(err.body(), status_code=err.status, media_type="application/json")


async def read_body(request: Request) -> bytes:
    """The body, refused past MAX_REQUEST_BYTES without reading the rest."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise ContractError("too-large", f"the request is larger than {MAX_REQUEST_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_REQUEST_BYTES:
            raise ContractError("too-large", f"the request is larger than {MAX_REQUEST_BYTES} bytes")
    return bytes(body)


def create_app(settings: Settings) -> FastAPI:
    runner = Runner(
        provision_database(settings.provision_ms / 1000),
        source=f"/prestart-hooks/{settings.hook_name}",
        sink=settings.sink,
    )
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> Response:
        return PlainTextResponse("ok")

    # Knative posts to "/", a Broker's Trigger to whatever path its subscriber URI names.
    @app.post("/")
    @app.post("/{path:path}")
    async def delivery(request: Request) -> Response:
        # Every answer below is either a 4xx with a reason or a 202 with an EMPTY body: behind a
        # Broker, a 2xx body that is not a CloudEvent becomes a 502, which is retried.
        try:
            parsed = parse_requested(request.headers.items(), await read_body(request))
        except ContractError as err:
            log.warning("request refused (%s): %s", err.code, err.reason)
            return refusal(err)
        if parsed.hook != settings.hook_name:
            log.info('request %s for hook "%s" ignored: this service serves "%s"', parsed.key, parsed.hook, settings.hook_name)
            return Response(status_code=202)
        if parsed.action == "cancel":
            log.info("cancel %s (%s): %s", parsed.key, parsed.data.get("reason"), runner.cancel(parsed))
        else:
            # What will run, as the request names it: digests where Knative resolved them.
            log.info("request %s (%s): %s", parsed.key, images_line(parsed), runner.submit(parsed))
        return Response(status_code=202)

    return app


def main() -> None:
    settings = Settings.from_env()
    logging.basicConfig(
        level=settings.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    # Bound here rather than by uvicorn, so that PORT=0 can say which port it got.
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), log_level=settings.log_level, access_log=False, lifespan="off")
    )
    print(f'hook "{settings.hook_name}" listening on http://{shown}:{port}', flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
