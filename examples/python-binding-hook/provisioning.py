"""The work itself: "provisions" a database for a new Revision (it only waits, in four steps,
reporting progress after each) and hands the Revision the Secret with the credentials, as
environment variables and as a volume mounted at $SERVICE_BINDING_ROOT/db.

Params it reads from its PrestartHook: secretName (default demo-db), fail (true makes the second
step fail, to see a held Revision), busyAttempts (default 0: attempts up to this one find the
database quota busy and ask the gate to ask again in busySeconds, default 1).

The reply names the images it would act on (a scanner would scan these): each container's digest
as the request names it, never a tag, which can move before Knative runs it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from contract import Request, is_dns_subdomain
from runner import Outcome, Progress, Work

STEPS = (
    "creating the database",
    "creating the user",
    "storing the credentials in a Secret",
    "waiting for the database to accept connections",
)


def env_contribution(name: str, secret_name: str, env: dict[str, str]) -> dict[str, Any]:
    """Secret keys as environment variables: env maps VARIABLE -> key in the Secret."""
    return {"name": name, "secretName": secret_name, "as": "env", "env": dict(env)}


def volume_contribution(name: str, secret_name: str) -> dict[str, Any]:
    """The Secret mounted at $SERVICE_BINDING_ROOT/<name> (servicebinding.io)."""
    return {"name": name, "secretName": secret_name, "as": "volume"}


def allowed_only(request: Request, contributions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gate keeps only the kinds the PrestartHook allows; sending others would only add a note."""
    allowed = request.data["contributions"]["allowed"]
    return [c for c in contributions if c["as"] in allowed]


def images_line(request: Request) -> str:
    """`images: name=reference, ...` from revision.containers; a version 1 request does not say."""
    images = request.images_to_run
    if images is None:
        return "images: not named (a version 1 request)"
    return "images: " + (", ".join(f"{name}={ref}" for name, ref in images.items()) or "none")


def provision_database(duration_s: float) -> Work:
    async def work(request: Request, progress: Progress) -> Outcome:
        params = request.data["hook"]["params"]
        secret_name = params.get("secretName", "demo-db")
        if not is_dns_subdomain(secret_name):
            return Outcome(
                False, f"params.secretName must be a Secret name (a DNS-1123 subdomain), got {secret_name!r}"
            )
        revision = request.data["revision"]
        database = revision.get("service") or revision["name"]
        busy_attempts, busy_seconds = params.get("busyAttempts", 0), params.get("busySeconds", 1)
        if request.attempt <= busy_attempts:
            # Not an error: the quota frees up later. Ask to be asked again rather than fail or wait here.
            return Outcome(False, f"{database}: database quota busy (attempt {request.attempt})", retry_after=busy_seconds)
        for i, step in enumerate(STEPS):
            await progress(i * 100 // len(STEPS), f"{database}: {step}")
            # Raises CancelledError when the gate cancels or the deadline passes: nothing is sent then.
            await asyncio.sleep(duration_s / len(STEPS))
            if params.get("fail") is True and i == 1:
                return Outcome(False, f'{database}: the database server refused to create user "app"')
        return Outcome(
            True,
            f"database {database} ready; credentials in Secret {secret_name}; {images_line(request)}",
            allowed_only(
                request,
                [
                    env_contribution("db-env", secret_name, {"DATABASE_URL": "uri", "DATABASE_PASSWORD": "password"}),
                    volume_contribution("db", secret_name),
                ],
            ),
        )

    return work
