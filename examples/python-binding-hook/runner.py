"""Runs the work once per request. Deliveries are at least once and the gate re-sends unanswered
requests, so: a repeat of a running request joins it, a repeat of a finished one gets the same
final event again (same id: the gate sees a duplicate), and a cancel stops the run or, when it
overtook its start, keeps that start from running. Nothing is sent for a cancelled run or one
whose deadline passed: the gate has stopped listening.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from cloudevents.core.v1.event import CloudEvent

from contract import MAX_MESSAGE, Request, build_completed, to_binary
from replies import SendError, SendPolicy, post_event

log = logging.getLogger("prestart-hook")

Progress = Callable[[int, str], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    message: str | None = None
    contributions: list[dict[str, Any]] = field(default_factory=list)
    #: Not ready yet: ask me again in this many seconds (outcome "retry"; message is the reason).
    retry_after: int | None = None


Work = Callable[[Request, Progress], Awaitable[Outcome]]

K = TypeVar("K")
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """Forgets the least recently used entries beyond `capacity`: memory must not grow with every Revision."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]

    def set(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


def clip(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


class Runner:
    def __init__(
        self,
        work: Work,
        source: str,
        sink: str = "",
        policy: SendPolicy = SendPolicy(),
        remember: int = 1000,
    ) -> None:
        self.work = work
        self.source = source
        self.sink = sink
        self.policy = policy
        self._running: dict[str, asyncio.Task[None]] = {}
        self._running_by_attempt: dict[str, str] = {}
        self._finished: Bounded[str, CloudEvent] = Bounded(remember)
        self._cancelled: Bounded[str, str] = Bounded(remember)
        # Tasks must be referenced until they end, or the loop may drop them.
        self._tasks: set[asyncio.Task[None]] = set()

    def target(self, request: Request) -> str | None:
        # A configured sink (K_SINK, injected by a SinkBinding) wins: an operator who bound the
        # hook to a Broker wants replies to go through it.
        return self.sink or request.reply_to

    def submit(self, request: Request) -> str:
        """Takes a start; returns what became of it, for the log."""
        final = self._finished.get(request.key)
        if final is not None:
            self._spawn(self._deliver(request, final))
            return f"finished before: sending the same reply {final.get_id()} again"
        if request.key in self._running:
            return "joined the run in progress"
        why = self._cancelled.get(request.attempt_key)
        if why is not None:
            return f"not run: it was cancelled before it started ({why})"
        deadline = request.deadline
        left = (deadline - datetime.now(timezone.utc)).total_seconds() if deadline else 0
        if left <= 0:
            return f"not run: its deadline {request.data.get('deadline')} has passed"
        task = self._spawn(self._run(request, left))
        self._running[request.key] = task
        self._running_by_attempt[request.attempt_key] = request.key
        return "started"

    def cancel(self, request: Request) -> str:
        reason = request.data.get("reason", "cancelled")
        self._cancelled.set(request.attempt_key, reason)
        key = self._running_by_attempt.get(request.attempt_key)
        task = self._running.get(key) if key else None
        if task is None:
            return "remembered"
        task.cancel(reason)
        return "stopped the run"

    def _spawn(self, coroutine: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, request: Request, seconds_left: float) -> None:
        where = f"{request.data['revision']['namespace']}/{request.data['revision']['name']} attempt {request.attempt}"
        log.info("run started for %s (%s)", where, request.key)
        try:
            try:
                outcome = await asyncio.wait_for(self.work(request, self._progress_sender(request)), seconds_left)
                final = self._final_event(request, outcome)
            except (asyncio.CancelledError, TimeoutError) as err:
                ended = "it was cancelled" if isinstance(err, asyncio.CancelledError) else "its deadline passed"
                log.info("run for %s ended without a reply: %s", where, ended)
                return
            except Exception as err:  # noqa: BLE001 - a bug in the work must still end the attempt
                log.warning("run for %s raised %r; replying failed", where, err)
                final = build_completed(
                    request, {"outcome": "failed", "message": clip(f"the hook threw: {err}")}, self.source
                )
        finally:
            self._running.pop(request.key, None)
            self._running_by_attempt.pop(request.attempt_key, None)
        self._finished.set(request.key, final)
        await self._deliver(request, final)

    def _final_event(self, request: Request, outcome: Outcome) -> CloudEvent:
        if outcome.retry_after is not None:
            # The attempt ends here; the gate asks again (a new attempt, a new id) after the delay.
            retry = {"outcome": "retry", "retryAfter": outcome.retry_after, "message": clip(outcome.message or "not ready yet")}
            return build_completed(request, retry, self.source)
        data: dict[str, Any] = {"outcome": "succeeded" if outcome.succeeded else "failed"}
        if outcome.message is not None:
            data["message"] = clip(outcome.message)
        elif not outcome.succeeded:
            data["message"] = "failed"
        if outcome.succeeded and outcome.contributions:
            data["contributions"] = outcome.contributions
        try:
            return build_completed(request, data, self.source)
        except ValueError as err:
            message = clip(f"the hook returned an invalid outcome: {err}")
            return build_completed(request, {"outcome": "failed", "message": message}, self.source)

    def _progress_sender(self, request: Request) -> Progress:
        async def progress(percent: int, message: str) -> None:
            target = self.target(request)
            if not target:
                return
            data = {"outcome": "progress", "progress": max(0, min(100, round(percent))), "message": clip(message)}
            try:
                await post_event(target, to_binary(build_completed(request, data, self.source)), self.policy)
            except SendError as err:
                # A lost report only costs a status update.
                log.warning("progress report not delivered: %s", err)

        return progress

    async def _deliver(self, request: Request, final: CloudEvent) -> None:
        target = self.target(request)
        outcome = final.get_data()["outcome"]  # type: ignore[index]
        if not target:
            log.error("no K_SINK and no data.replyTo: the %s reply to %s cannot be sent", outcome, request.key)
            return
        try:
            await post_event(target, to_binary(final), self.policy)
            log.info("reply %s (%s) sent to %s", final.get_id(), outcome, target)
        except SendError as err:
            log.error("reply %s not delivered; it is sent again when the gate re-sends the request: %s", final.get_id(), err)
