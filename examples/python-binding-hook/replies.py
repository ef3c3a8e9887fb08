"""POSTs a completed event (binary mode) to the gate's sink or a Broker, retrying what may work
later (network errors, 5xx, 408, 409, 429) with bounded exponential backoff. Any other 4xx is
the gate refusing the reply for good (a stale attempt, a cancelled hook): retrying would only
repeat it.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from cloudevents.core.bindings.http import HTTPMessage


@dataclass(frozen=True)
class SendPolicy:
    attempts: int = 6
    base_delay: float = 0.25
    max_delay: float = 10.0
    #: No new try starts after this many seconds since the first one.
    max_elapsed: float = 60.0
    #: Per try.
    timeout: float = 10.0


class SendError(Exception):
    def __init__(self, reason: str, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent


def is_retriable(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirected POST would turn into a GET: treat the 3xx as the answer instead.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


_opener = urllib.request.build_opener(_NoRedirects)


#: The projected ServiceAccount token for the gate's sink audience (docs/protocol.md, "Sender identity").
DEFAULT_TOKEN_FILE = "/var/run/secrets/tokens/prestart-token"


def reply_token() -> str | None:
    """The token to send with a reply, read on every send (the kubelet replaces the file before it
    expires). A file named by PRESTART_TOKEN_FILE must exist; the default one may be absent (no token).
    """
    named = os.environ.get("PRESTART_TOKEN_FILE", "")
    try:
        with open(named or DEFAULT_TOKEN_FILE, encoding="utf-8") as f:
            return f.read().strip() or None
    except FileNotFoundError:
        if named:
            raise
        return None


def _post_once(url: str, message: HTTPMessage, timeout: float) -> tuple[int, bytes]:
    headers = dict(message.headers)
    token = reply_token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=message.body, headers=headers, method="POST")
    try:
        with _opener.open(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _delay(retry: int, policy: SendPolicy) -> float:
    # Half fixed, half random: many hooks retrying against one Broker must not retry in lockstep.
    step = min(policy.max_delay, policy.base_delay * 2 ** (retry - 1))
    return step / 2 + random.random() * step / 2


async def post_event(url: str, message: HTTPMessage, policy: SendPolicy = SendPolicy()) -> None:
    """Resolves once a 2xx came back; raises SendError otherwise."""
    started = time.monotonic()
    tries = 0
    while True:
        tries += 1
        try:
            # urllib blocks; a thread keeps the event loop answering deliveries meanwhile.
            status, answer = await asyncio.to_thread(_post_once, url, message, policy.timeout)
            if 200 <= status < 300:
                return
            excerpt = answer[:200].decode("utf-8", "replace").replace("\n", " ")
            reason = f"POST {url} answered {status}" + (f": {excerpt}" if excerpt else "")
            if not is_retriable(status):
                raise SendError(reason, permanent=True)
        except (OSError, urllib.error.URLError) as err:
            reason = f"POST {url}: {getattr(err, 'reason', err)}"
        delay = _delay(tries, policy)
        if tries >= policy.attempts or time.monotonic() - started + delay > policy.max_elapsed:
            raise SendError(f"{reason} (gave up after {tries} tries)", permanent=False)
        await asyncio.sleep(delay)
