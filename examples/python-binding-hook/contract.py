"""The prestart CloudEvents contract, hook side: read a revision.prestart.requested, build a
revision.prestart.completed. docs/protocol.md is the reference and schemas/vectors/ the tests
(test_vectors.py runs them against this module).

Decoding and encoding go through the CloudEvents SDK (cloudevents.core). Before the SDK sees a
message, the raw attributes are checked here, because the SDK fills a missing id with a fresh
UUID and a missing specversion with 1.0: a request without them must be refused, not invented.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote

from cloudevents.core.bindings.http import HTTPMessage, from_binary, from_structured, to_binary_event
from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

REQUESTED_TYPE = "revision.prestart.requested"
COMPLETED_TYPE = "revision.prestart.completed"
SPEC_VERSION = "1.0"
JSON_CONTENT_TYPE = "application/json"
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"

EXT_HOOK = "prestarthook"
EXT_ATTEMPT = "prestartattempt"
EXT_CORRELATION_ID = "correlationid"
EXT_REPLY_ID = "replyid"

#: The dataschema of a protocol version 2 request (revision.containers); a request without one comes
#: from a version 1 gate. Any other value is read with the version 2 rules (a newer gate).
REQUESTED_DATASCHEMA_V2 = "https://prestart.dev/schemas/v1alpha1/requested.data.v2.schema.json"
REQUESTED_DATASCHEMA_V1 = "https://prestart.dev/schemas/v1alpha1/requested.data.schema.json"

MAX_REQUEST_BYTES = 1024 * 1024
MAX_REPLY_BYTES = 64 * 1024
MAX_CORRELATION_ID_LENGTH = 1024
MAX_MESSAGE = 4096

_STATUS = {
    "malformed": 400,
    "too-large": 413,
    "unsupported-mode": 415,
    "wrong-type": 400,
    "invalid-data": 422,
    "bad-replyid": 403,
    "hook-mismatch": 422,
}


class ContractError(Exception):
    """Why a message was refused; `status` is the HTTP answer (every one is permanent)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.status = _STATUS[code]

    def body(self) -> bytes:
        return json.dumps({"error": self.reason, "code": self.code}).encode()


# ---------------------------------------------------------------------------------------------
# The HTTP binding (binary and structured content modes)

_ATTRIBUTE_NAME = re.compile(r"[a-z0-9]{1,64}")
_CORE = {"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema"}
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def _lowercase(headers: Headers) -> dict[str, str]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        if key in out and out[key] != value:
            raise ContractError("malformed", "the same header appears twice with different values")
        out[key] = value
    return out


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def is_json(content_type: str) -> bool:
    media = _media_type(content_type)
    return media in (JSON_CONTENT_TYPE, "text/json") or media.endswith("+json")


def parse_rfc3339(text: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime, or None (fractions beyond microseconds are cut)."""
    m = _RFC3339.fullmatch(text)
    if not m:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    micros = int((fraction or ".0")[1:7].ljust(6, "0"))
    try:
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tz)
    except ValueError:
        return None


def _core_problem(attributes: Mapping[str, Any]) -> str | None:
    specversion = attributes.get("specversion")
    if specversion is None:
        return "missing required attribute specversion"
    if specversion != SPEC_VERSION:
        return f"unsupported specversion {json.dumps(specversion)}: only {SPEC_VERSION} is accepted"
    for name in ("id", "source", "type"):
        value = attributes.get(name)
        if value is None:
            return f"missing required attribute {name}"
        if not isinstance(value, str) or not value:
            return f"attribute {name} must be a non-empty string"
    for name in ("subject", "datacontenttype", "dataschema"):
        value = attributes.get(name)
        if value is not None and not isinstance(value, str):
            return f"attribute {name} must be a string"
    time = attributes.get("time")
    if time is not None and (not isinstance(time, str) or parse_rfc3339(time) is None):
        return f"attribute time must be an RFC 3339 timestamp, got {json.dumps(time)}"
    return None


def parse_message(headers: Headers, body: bytes, max_bytes: int) -> CloudEvent:
    """One CloudEvent from an HTTP message, binary or structured mode. Raises ContractError."""
    if len(body) > max_bytes:
        raise ContractError("too-large", f"body of {len(body)} bytes is larger than the limit of {max_bytes} bytes")
    lower = _lowercase(headers)
    content_type = lower.get("content-type")
    media = _media_type(content_type)
    if media == BATCH_CONTENT_TYPE:
        raise ContractError("unsupported-mode", "batch mode is not supported: send one event per request")
    if media == STRUCTURED_CONTENT_TYPE:
        return _parse_structured(lower, body)
    if media.startswith("application/cloudevents"):
        raise ContractError(
            "unsupported-mode", f"structured mode with {media} is not supported: use {STRUCTURED_CONTENT_TYPE}"
        )
    if "ce-specversion" in lower or "ce-id" in lower or "ce-type" in lower:
        return _parse_binary(lower, content_type, body)
    shown = f'"{content_type}"' if content_type else "missing"
    raise ContractError(
        "malformed", f"not a CloudEvent: no ce-specversion header and content-type {shown} is not {STRUCTURED_CONTENT_TYPE}"
    )


def _parse_binary(headers: dict[str, str], content_type: str | None, body: bytes) -> CloudEvent:
    kept: dict[str, str] = {}
    raw: dict[str, str] = {}
    for name, value in headers.items():
        if name == "content-type":
            kept[name] = value
            continue
        if not name.startswith("ce-"):
            continue
        attribute = name[3:]
        # Intermediaries add headers that merely look like attributes; they are not ours to refuse.
        if not _ATTRIBUTE_NAME.fullmatch(attribute) or attribute in ("data", "datacontenttype"):
            continue
        kept[name] = value
        raw[attribute] = unquote(value)
    problem = _core_problem(raw)
    if problem:
        raise ContractError("malformed", problem)
    if body and (content_type is None or is_json(content_type)):
        try:
            json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ContractError(
                "malformed", f"body is not valid JSON (content-type {content_type or 'missing, JSON assumed'})"
            ) from None
    try:
        return from_binary(HTTPMessage(kept, body), JSONFormat(), CloudEvent)
    except (BaseCloudEventException, ValueError) as err:
        raise ContractError("malformed", f"not a valid CloudEvent: {err}") from None


def _parse_structured(headers: dict[str, str], body: bytes) -> CloudEvent:
    try:
        document = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ContractError("malformed", f"body is not valid JSON (content-type {STRUCTURED_CONTENT_TYPE})") from None
    if not isinstance(document, dict):
        raise ContractError("malformed", "structured body must be a JSON object")
    kept: dict[str, Any] = {}
    for name, value in document.items():
        if name in ("data", "data_base64"):
            kept[name] = value
            continue
        if not _ATTRIBUTE_NAME.fullmatch(name):
            continue
        if name not in _CORE and not _is_scalar(value):
            raise ContractError("malformed", f'extension attribute "{name}" must be a string, number or boolean')
        kept[name] = value
    problem = _core_problem(kept)
    if problem:
        raise ContractError("malformed", problem)
    if "data" in kept and "data_base64" in kept:
        raise ContractError("malformed", "structured body has both data and data_base64")
    try:
        return from_structured(HTTPMessage(headers, json.dumps(kept).encode()), JSONFormat(), CloudEvent)
    except (BaseCloudEventException, ValueError) as err:
        raise ContractError("malformed", f"not a valid CloudEvent: {err}") from None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float))


def json_data(event: CloudEvent) -> Any:
    """The event's data as a JSON value. Raises ContractError (invalid-data) when it is not JSON."""
    content_type = event.get_datacontenttype()
    if content_type is not None and not is_json(content_type):
        raise ContractError("invalid-data", f'datacontenttype "{content_type}" is not {JSON_CONTENT_TYPE}')
    data = event.get_data()
    if isinstance(data, (bytes, bytearray)):
        raise ContractError("invalid-data", "data must be JSON, not binary (data_base64)")
    if isinstance(data, str):
        # Some senders stringify the JSON twice; a string that parses is taken as what they meant.
        try:
            return json.loads(data)
        except ValueError:
            return data
    return data


def integer_attribute(value: Any) -> int | None:
    """An Integer extension from either mode: 2 in structured JSON, "2" in a header."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,15}", value):
        return int(value)
    return None


# ---------------------------------------------------------------------------------------------
# The data schemas (schemas/*.data.schema.json), written out: the first violation, in words.

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s]*")
# An OCI digest reference, name@algorithm:encoded; sha256 has exactly 64 lowercase hex digits.
_DIGEST = re.compile(r"[^@\s]+@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_SHA256 = re.compile(r".*@sha256:[a-f0-9]{64}")
KINDS = ("env", "envFrom", "volume")


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and _DNS_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 253 and _DNS_SUBDOMAIN.fullmatch(value) is not None


def is_hook_name(value: Any) -> bool:
    """A PrestartHook's name, or <namespace>/<name> for a NamespacedPrestartHook."""
    if not isinstance(value, str):
        return False
    namespace, slash, name = value.partition("/")
    if not slash:
        return is_dns_subdomain(value)
    return len(namespace) <= 63 and _DNS_LABEL.fullmatch(namespace) is not None and is_dns_subdomain(name)


def _is_integer(value: Any) -> bool:
    return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))


def _string_map_problem(value: Any, path: str) -> str | None:
    if not isinstance(value, dict):
        return f"{path} must be an object"
    for key, item in value.items():
        if not isinstance(item, str):
            return f"{path}/{key} must be a string"
    return None


def requested_version(dataschema: str | None) -> int:
    """The protocol version a request declares: 1 without dataschema (an older gate), else 2."""
    return 1 if dataschema is None or dataschema == REQUESTED_DATASCHEMA_V1 else 2


def check_requested_data(data: Any, version: int = 2) -> str | None:
    """None when `data` satisfies requested.data.schema.json (version 1: without the rule that a
    start names its containers), else the first problem."""
    if not isinstance(data, dict):
        return "data must be an object"
    for member in ("action", "revision", "hook", "attempt", "contributions"):
        if member not in data:
            return f'data is missing "{member}"'
    action = data["action"]
    if action not in ("start", "cancel"):
        return 'data/action must be one of "start", "cancel"'
    if "reason" in data:
        reason = data["reason"]
        if not isinstance(reason, str) or not 1 <= len(reason) <= 1024:
            return "data/reason must be a string of 1 to 1024 characters"
    problem = _revision_problem(data["revision"])
    if problem:
        return problem
    hook = data["hook"]
    if not isinstance(hook, dict):
        return "data/hook must be an object"
    for member in ("name", "params"):
        if member not in hook:
            return f'data/hook is missing "{member}"'
    if not is_hook_name(hook["name"]):
        return "data/hook/name must be a DNS-1123 subdomain, or <namespace>/<name>"
    if not isinstance(hook["params"], dict):
        return "data/hook/params must be an object"
    if not _is_integer(data["attempt"]) or data["attempt"] < 1:
        return "data/attempt must be an integer >= 1"
    if "deadline" in data and not (isinstance(data["deadline"], str) and parse_rfc3339(data["deadline"])):
        return "data/deadline must be an RFC 3339 date-time"
    if "replyTo" in data and not (isinstance(data["replyTo"], str) and _URI.fullmatch(data["replyTo"])):
        return "data/replyTo must be a URI"
    contributions = data["contributions"]
    if not isinstance(contributions, dict):
        return "data/contributions must be an object"
    if "allowed" not in contributions:
        return 'data/contributions is missing "allowed"'
    allowed = contributions["allowed"]
    if not isinstance(allowed, list) or any(kind not in KINDS for kind in allowed):
        return 'data/contributions/allowed must be a list of "env", "envFrom", "volume"'
    if len(set(allowed)) != len(allowed):
        return "data/contributions/allowed must not repeat a kind"
    if action == "cancel" and "reason" not in data:
        return 'data: action "cancel" needs a reason'
    if action == "start" and "deadline" not in data:
        return 'data: action "start" needs a deadline'
    if version >= 2 and action == "start" and "containers" not in data["revision"]:
        return 'data/revision: action "start" needs containers (protocol version 2: each container with the digest Knative resolved)'
    return None


def _revision_problem(revision: Any) -> str | None:
    if not isinstance(revision, dict):
        return "data/revision must be an object"
    for member in ("namespace", "name", "uid", "labels", "annotations", "images"):
        if member not in revision:
            return f'data/revision is missing "{member}"'
    if not is_dns_label(revision["namespace"]):
        return "data/revision/namespace must be a DNS-1123 label"
    for member in ("name", "service", "configuration"):
        if member in revision and not is_dns_subdomain(revision[member]):
            return f"data/revision/{member} must be a DNS-1123 subdomain"
    uid = revision["uid"]
    if not isinstance(uid, str) or not 1 <= len(uid) <= 128:
        return "data/revision/uid must be a string of 1 to 128 characters"
    for member in ("labels", "annotations"):
        problem = _string_map_problem(revision[member], f"data/revision/{member}")
        if problem:
            return problem
    images = revision["images"]
    if not isinstance(images, list) or any(not isinstance(i, str) or not i for i in images):
        return "data/revision/images must be a list of non-empty strings"
    if "containers" in revision:
        containers = revision["containers"]
        if not isinstance(containers, list):
            return "data/revision/containers must be a list"
        for i, container in enumerate(containers):
            problem = _container_problem(container, f"data/revision/containers/{i}")
            if problem:
                return problem
    return None


def _container_problem(c: Any, path: str) -> str | None:
    # Unknown members are allowed here too: a newer gate may add some.
    if not isinstance(c, dict):
        return f"{path} must be an object"
    for member in ("name", "image"):
        if member not in c:
            return f'{path} is missing "{member}"'
    if not is_dns_label(c["name"]):
        return f"{path}/name must be a DNS-1123 label"
    if not isinstance(c["image"], str) or not 1 <= len(c["image"]) <= 4096:
        return f"{path}/image must be a string of 1 to 4096 characters"
    if "digest" in c:
        digest = c["digest"]
        if (
            not isinstance(digest, str)
            or len(digest) > 4096
            or not _DIGEST.fullmatch(digest)
            or ("@sha256:" in digest and not _SHA256.fullmatch(digest))
        ):
            return f"{path}/digest must be a digest reference (repository@sha256:<64 hex digits>)"
    if "init" in c and not isinstance(c["init"], bool):
        return f"{path}/init must be a boolean"
    return None


def check_completed_data(data: Any) -> str | None:
    """None when `data` satisfies completed.data.schema.json, else the first problem."""
    if not isinstance(data, dict):
        return "data must be an object"
    for member in data:
        if member not in ("outcome", "message", "details", "progress", "retryAfter", "contributions"):
            return f'data has an unknown member "{member}"'
    if "outcome" not in data:
        return 'data is missing "outcome"'
    outcome = data["outcome"]
    if outcome not in ("succeeded", "failed", "progress", "retry"):
        return 'data/outcome must be one of "succeeded", "failed", "progress", "retry"'
    if "message" in data and (not isinstance(data["message"], str) or len(data["message"]) > MAX_MESSAGE):
        return f"data/message must be a string of at most {MAX_MESSAGE} characters"
    # retry (ask me again in retryAfter seconds): the delay and a reason are required, and only there.
    if outcome == "retry":
        if "retryAfter" not in data or not data.get("message"):
            return 'data: outcome "retry" needs retryAfter (seconds until the gate asks again, 1 to 86400) and a message (the reason)'
        if not _is_integer(data["retryAfter"]) or not 1 <= data["retryAfter"] <= 86400:
            return "data/retryAfter must be an integer from 1 to 86400"
    elif "retryAfter" in data:
        return 'data/retryAfter is only allowed with outcome "retry"'

    # details (optional, added compatibly): one line, no control characters, 1 to 1024 characters.
    if "details" in data:
        details = data["details"]
        if not isinstance(details, str) or not 1 <= len(details) <= 1024 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in details):
            return "data/details must be one line of 1 to 1024 characters"
    if "progress" in data and (not _is_integer(data["progress"]) or not 0 <= data["progress"] <= 100):
        return "data/progress must be an integer from 0 to 100"
    if "contributions" not in data:
        return None
    contributions = data["contributions"]
    if not isinstance(contributions, list):
        return "data/contributions must be a list"
    if len(contributions) > 32:
        return "data/contributions must have at most 32 items"
    for i, contribution in enumerate(contributions):
        problem = _contribution_problem(contribution, f"data/contributions/{i}")
        if problem:
            return problem
    if outcome != "succeeded" and contributions:
        return 'data/contributions: contributions are only allowed with outcome "succeeded"'
    return None


def _contribution_problem(c: Any, path: str) -> str | None:
    if not isinstance(c, dict):
        return f"{path} must be an object"
    for member in c:
        if member not in ("name", "secretName", "as", "env"):
            return f'{path} has an unknown member "{member}"'
    for member in ("name", "secretName", "as"):
        if member not in c:
            return f'{path} is missing "{member}"'
    if not is_dns_label(c["name"]):
        return f"{path}/name must be a DNS-1123 label"
    if not is_dns_subdomain(c["secretName"]):
        return f"{path}/secretName must be a DNS-1123 subdomain"
    if c["as"] not in KINDS:
        return f'{path}/as must be one of "env", "envFrom", "volume"'
    if c["as"] != "env":
        return f'{path}: env is only allowed when as is "env"' if "env" in c else None
    if "env" not in c:
        return f"{path}: a contribution with as \"env\" needs an env map {{VARIABLE: secretKey}}"
    env = c["env"]
    if not isinstance(env, dict) or not 1 <= len(env) <= 64:
        return f"{path}/env must be an object with 1 to 64 members"
    for variable, key in env.items():
        if len(variable) > 256 or not _ENV_NAME.fullmatch(variable):
            return f'{path}/env (key "{variable}") must be an environment variable name'
        if not isinstance(key, str) or len(key) > 253 or not _SECRET_KEY.fullmatch(key):
            return f"{path}/env/{variable} must be a Secret key"
    return None


# ---------------------------------------------------------------------------------------------
# Requests in, replies out


@dataclass(frozen=True)
class Request:
    """A validated revision.prestart.requested, as a hook sees it."""

    event: CloudEvent
    data: dict[str, Any]
    #: Echo it as `replyid` on every reply; only the gate can check it.
    correlationid: str
    hook: str
    attempt: int
    subject: str | None
    #: source#id: the same request delivered twice has the same key.
    key: str
    #: 1 from a gate older than revision.containers, 2 otherwise.
    version: int = 2

    @property
    def action(self) -> str:
        return self.data["action"]

    @property
    def attempt_key(self) -> str:
        """What a cancel names: the key of the start it cancels (its id is the cancel's without /cancel).

        Ids name the PrestartRun: a run created again starts at attempt 1 again under new ids."""
        return self.key.removesuffix("/cancel") if self.action == "cancel" else self.key

    @property
    def deadline(self) -> datetime | None:
        return parse_rfc3339(self.data["deadline"]) if "deadline" in self.data else None

    @property
    def reply_to(self) -> str | None:
        return self.data.get("replyTo")

    @property
    def images_to_run(self) -> dict[str, str] | None:
        """Container name -> what to scan or run: Knative's digest, else the image as written (a
        registry Knative does not resolve runs exactly that). None for a request from a version 1
        gate, which does not say what will run."""
        containers = self.data["revision"].get("containers")
        if containers is None:
            return None
        return {c["name"]: c.get("digest") or c["image"] for c in containers}


def parse_requested(headers: Headers, body: bytes, max_bytes: int = MAX_REQUEST_BYTES) -> Request:
    """Reads and validates a request. Raises ContractError with the code and status to answer."""
    event = parse_message(headers, body, max_bytes)
    if event.get_type() != REQUESTED_TYPE:
        raise ContractError("wrong-type", f'type is "{event.get_type()}", expected "{REQUESTED_TYPE}"')
    correlationid = event.get_extension(EXT_CORRELATION_ID)
    if not isinstance(correlationid, str) or not 0 < len(correlationid) <= MAX_CORRELATION_ID_LENGTH:
        raise ContractError(
            "malformed", f"missing or oversized {EXT_CORRELATION_ID} extension: a reply could not be correlated"
        )
    data = json_data(event)
    version = requested_version(event.get_dataschema())
    problem = check_requested_data(data, version)
    if problem:
        raise ContractError("invalid-data", problem)
    hook = event.get_extension(EXT_HOOK)
    if hook is not None and hook != data["hook"]["name"]:
        raise ContractError("hook-mismatch", f'{EXT_HOOK} "{hook}" differs from data.hook.name "{data["hook"]["name"]}"')
    attempt = event.get_extension(EXT_ATTEMPT)
    if attempt is not None and integer_attribute(attempt) != data["attempt"]:
        raise ContractError("hook-mismatch", f"{EXT_ATTEMPT} {attempt} differs from data.attempt {data['attempt']}")
    return Request(
        event=event,
        data=data,
        correlationid=correlationid,
        hook=data["hook"]["name"],
        attempt=int(data["attempt"]),
        subject=event.get_subject(),
        key=f"{event.get_source()}#{event.get_id()}",
        version=version,
    )


def build_completed(
    request: Request,
    data: dict[str, Any],
    source: str,
    event_id: str | None = None,
    time: datetime | None = None,
) -> CloudEvent:
    """A reply to `request`. Raises ValueError when `data` breaks the schema: that is a bug, not something to send."""
    problem = check_completed_data(data)
    if problem:
        raise ValueError(problem)
    attributes: dict[str, Any] = {
        "specversion": SPEC_VERSION,
        "id": event_id or str(uuid.uuid4()),
        "source": source,
        "type": COMPLETED_TYPE,
        "time": time or datetime.now(timezone.utc),
        "datacontenttype": JSON_CONTENT_TYPE,
        # Byte for byte: the gate takes the reply's identity from this alone.
        EXT_REPLY_ID: request.correlationid,
        EXT_HOOK: request.hook,
        EXT_ATTEMPT: request.attempt,
    }
    if request.subject is not None:
        attributes["subject"] = request.subject
    return CloudEvent(attributes, data)


def to_binary(event: CloudEvent) -> HTTPMessage:
    """Binary content mode: attributes in percent-encoded ce-* headers, data as the body."""
    return to_binary_event(event)
