"""The shared vectors in schemas/vectors/ against contract.py: the requests a hook must take or
refuse, and the replies it builds. Vectors whose code only the gate can produce (bad-replyid,
hook-mismatch and wrong-type of a reply: they need the gate's key or are about the gate's sink)
are listed in GATE_ONLY and checked to be exactly those.

    python -m pytest        (from this folder; PRESTART_VECTORS=<dir> points elsewhere)
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contract import (
    COMPLETED_TYPE,
    EXT_ATTEMPT,
    EXT_HOOK,
    EXT_REPLY_ID,
    MAX_REPLY_BYTES,
    ContractError,
    Request,
    build_completed,
    check_completed_data,
    json_data,
    parse_message,
    parse_requested,
    parse_rfc3339,
    to_binary,
)
from provisioning import provision_database

VECTORS = Path(os.environ.get("PRESTART_VECTORS", Path(__file__).resolve().parents[2] / "schemas" / "vectors"))
GATE_ONLY = {"bad-replyid", "hook-mismatch", "wrong-type"}


def load(kind: str, verdict: str) -> list[tuple[str, dict[str, Any]]]:
    files = sorted((VECTORS / kind / verdict).glob("*.json"))
    assert files, f"no vectors in {VECTORS / kind / verdict}"
    return [(f.name, json.loads(f.read_text())) for f in files]


def cases(kind: str, verdict: str, leave_out: set[str] = set()) -> list[Any]:
    """One test case per vector file, named after it."""
    return [pytest.param(v, id=n) for n, v in load(kind, verdict) if v["expect"].get("code") not in leave_out]


def body_of(vector: dict[str, Any]) -> bytes:
    return vector["body"].encode("utf-8")


def correlation() -> dict[str, Any]:
    return json.loads((VECTORS / "correlation.json").read_text())


def request(name: str = "start-binary.json") -> Request:
    vector = json.loads((VECTORS / "requested" / "valid" / name).read_text())
    return parse_requested(vector["headers"], body_of(vector))


@pytest.mark.parametrize("vector", cases("requested", "valid"))
def test_takes_valid_request(vector: dict[str, Any]) -> None:
    parsed = parse_requested(vector["headers"], body_of(vector))
    assert parsed.correlationid == correlation()["primary"]
    assert parsed.hook == "db-migrate"
    assert parsed.attempt == 1
    assert parsed.subject == "shop/checkout-00002"
    assert parsed.attempt_key == f"{parsed.event.get_source()}#{correlation()['ref']['runUID']}/db-migrate/1"
    assert parsed.key == f"{parsed.event.get_source()}#{parsed.event.get_id()}"
    assert parsed.action == ("cancel" if "/cancel" in parsed.event.get_id() else "start")


@pytest.mark.parametrize("vector", cases("requested", "invalid"))
def test_refuses_invalid_request(vector: dict[str, Any]) -> None:
    with pytest.raises(ContractError) as refused:
        parse_requested(vector["headers"], body_of(vector))
    assert refused.value.code == vector["expect"]["code"], refused.value.reason
    assert 400 <= refused.value.status < 500


@pytest.mark.parametrize("name", [n for n, _ in load("requested", "valid")])
def test_reply_echoes_the_request(name: str) -> None:
    parsed = request(name)
    message = to_binary(build_completed(parsed, {"outcome": "succeeded", "message": "done"}, "/prestart-hooks/db-migrate"))
    # The gate takes the reply's identity from replyid alone: it must be the correlationid, byte for byte.
    assert message.headers[f"ce-{EXT_REPLY_ID}"] == parsed.correlationid
    assert message.headers[f"ce-{EXT_HOOK}"] == "db-migrate"
    assert message.headers[f"ce-{EXT_ATTEMPT}"] == "1"
    assert message.headers["ce-subject"] == "shop/checkout-00002"
    assert message.headers["ce-type"] == COMPLETED_TYPE
    assert message.headers["content-type"] == "application/json"
    assert json.loads(message.body) == {"outcome": "succeeded", "message": "done"}


@pytest.mark.parametrize("vector", cases("completed", "valid"))
def test_builds_replies_the_gate_accepts(vector: dict[str, Any]) -> None:
    shown = parse_message(vector["headers"], body_of(vector), vector.get("maxBytes", MAX_REPLY_BYTES))
    data = json_data(shown)
    assert check_completed_data(data) is None
    expected = vector["expect"]["reply"]
    for member in ("outcome", "message", "progress", "retryAfter", "contributions"):
        assert data.get(member) == expected.get(member), member

    # Rebuild the vector's reply with this hook's builder, answering the request it names.
    answered = request()
    if shown.get_extension(EXT_REPLY_ID) != answered.correlationid:
        answered = replace(answered, correlationid=shown.get_extension(EXT_REPLY_ID))
    built = build_completed(answered, data, shown.get_source(), shown.get_id(), shown.get_time())
    message = to_binary(built)
    again = parse_message(message.headers, message.body, MAX_REPLY_BYTES)
    assert f"{again.get_source()}#{again.get_id()}" == expected["eventKey"]
    for attribute in ("specversion", "type", EXT_REPLY_ID, "subject", EXT_HOOK):
        if shown.get_attributes().get(attribute) is not None:
            assert again.get_attributes()[attribute] == shown.get_attributes()[attribute], attribute
    if shown.get_extension(EXT_ATTEMPT) is not None:
        assert int(again.get_extension(EXT_ATTEMPT)) == int(shown.get_extension(EXT_ATTEMPT))
    assert again.get_time() == shown.get_time()
    assert json_data(again) == data


@pytest.mark.parametrize("vector", cases("completed", "invalid", leave_out=GATE_ONLY))
def test_refuses_what_the_gate_refuses(vector: dict[str, Any]) -> None:
    code = vector["expect"]["code"]
    # The same binding a request goes through, then the reply schema the builder enforces.
    with pytest.raises(ContractError) as refused:
        event = parse_message(vector["headers"], body_of(vector), vector.get("maxBytes", MAX_REPLY_BYTES))
        problem = check_completed_data(json_data(event))
        if problem:
            raise ContractError("invalid-data", problem)
    assert refused.value.code == code, refused.value.reason


def test_gate_only_codes_are_the_only_ones_left_out() -> None:
    codes = {v["expect"]["code"] for _, v in load("completed", "invalid")}
    assert codes - GATE_ONLY == {"malformed", "too-large", "unsupported-mode", "invalid-data"}


def test_builder_refuses_data_the_gate_would_refuse() -> None:
    with pytest.raises(ValueError, match="contributions are only allowed"):
        build_completed(
            request(),
            {"outcome": "failed", "contributions": [{"name": "db", "secretName": "db", "as": "volume"}]},
            "/prestart-hooks/db-migrate",
        )


def test_rfc3339_times_read_as_instants() -> None:
    assert parse_rfc3339("2025-06-01T12:00:00.123456789Z") == parse_rfc3339("2025-06-01T14:00:00.123456+02:00")
    assert parse_rfc3339("2025-13-01T12:00:00Z") is None
    assert parse_rfc3339("2025-06-01 12:00:00Z") is None


def test_version_2_names_what_will_run() -> None:
    parsed = request("start-binary.json")
    assert parsed.version == 2
    assert parsed.images_to_run == {
        "user-container": "registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        # Knative does not resolve kind.local: it runs the image as written, and so is it named.
        "cache-warmer": "kind.local/shop/cache-warmer:dev",
        "migrate": "registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9",
    }


def test_version_1_request_is_taken_without_containers() -> None:
    parsed = request("start-v1.json")
    assert parsed.version == 1
    assert parsed.images_to_run is None


def test_reply_names_the_images_it_acted_on() -> None:
    async def progress(_percent: int, _message: str) -> None:
        return None

    work = provision_database(0)
    v2 = asyncio.run(work(request("start-binary.json"), progress))
    assert v2.succeeded
    assert v2.message is not None and v2.message.endswith(
        "; images: user-container=registry.example/shop/checkout@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae, "
        "cache-warmer=kind.local/shop/cache-warmer:dev, "
        "migrate=registry.example/shop/migrate@sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"
    )
    v1 = asyncio.run(work(request("start-v1.json"), progress))
    assert v1.succeeded and v1.message is not None and v1.message.endswith("; images: not named (a version 1 request)")
