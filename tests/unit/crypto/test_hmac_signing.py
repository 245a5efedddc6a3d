"""§6.3 HMAC, §7.3 work-message and §8.5 event signatures against the §6.6 vectors."""

from __future__ import annotations

import pytest

from fetcher.crypto import (
    HmacStream,
    KeySet,
    extract_job_id,
    hmac_hex,
    sign_message,
    signing_input,
    verify_hex,
    verify_message,
)

EMPTY_DOC_HMAC = "81545b245bc1f37495819fc2afa806336436f7409fe320d1b787b79443de18e6"
WORK_BODY = b'{"jobId":"0190a1b2-0000-7000-8000-000000000001"}'
WORK_QUEUE = "fetcher.extract-external-data.queue"
WORK_SIGNATURE = "11f3993b1cc9796f6937e67ed9f827754e37fdda85270a1732a92d8ba303071f"
EVENT_BODY = (
    b'{"job_id":"0190a1b2-0000-7000-8000-000000000001","status":"failed",'
    b'"metadata":{"source":"payments","error":{"message":"failed to connect to datasource"}}}'
)
EVENT_SIGNATURE = "aeef9b589b34f8306ccb2833dfe6e37135011c4e69d0ff360f386b44e788e497"


def test_hmac_of_empty_document(keys: KeySet) -> None:
    assert hmac_hex(keys.external_hmac, b"{}") == EMPTY_DOC_HMAC


def test_hmac_stream_matches_one_shot(keys: KeySet) -> None:
    stream = HmacStream(keys.external_hmac)
    stream.update(b"{")
    stream.update(b"")
    stream.update(b"}")
    assert stream.hexdigest() == EMPTY_DOC_HMAC
    assert "81545b" not in repr(stream)


def test_verify_hex(keys: KeySet) -> None:
    assert verify_hex(keys.external_hmac, b"{}", EMPTY_DOC_HMAC)
    assert verify_hex(keys.external_hmac, b"{}", EMPTY_DOC_HMAC.encode())
    assert not verify_hex(keys.external_hmac, b"{ }", EMPTY_DOC_HMAC)
    assert not verify_hex(keys.internal_hmac, b"{}", EMPTY_DOC_HMAC)
    assert not verify_hex(keys.external_hmac, b"{}", EMPTY_DOC_HMAC.upper())
    assert not verify_hex(keys.external_hmac, b"{}", "")
    assert not verify_hex(keys.external_hmac, b"{}", "é" * 64)


def test_signing_input_layout() -> None:
    assert signing_input(1700000000, "", "j", "", "q", b"{}") == b"1700000000\nv1\n\nj\n\nq\n{}"
    assert signing_input("5", "t1", "", "ex", "rk", b"") == b"5\nv1\nt1\n\nex\nrk\n"


def test_work_message_vector(keys: KeySet) -> None:
    job_id = extract_job_id(WORK_BODY)
    assert job_id == "0190a1b2-0000-7000-8000-000000000001"
    signature = sign_message(
        keys.internal_hmac,
        t="1700000000",
        body=WORK_BODY,
        exchange="",
        routing_key=WORK_QUEUE,
        job_id=job_id,
    )
    assert signature == WORK_SIGNATURE
    assert verify_message(
        keys.internal_hmac,
        WORK_SIGNATURE,
        t=1700000000,
        body=WORK_BODY,
        exchange="",
        routing_key=WORK_QUEUE,
        job_id=job_id,
    )


def test_event_vector(keys: KeySet) -> None:
    assert extract_job_id(EVENT_BODY) == ""
    signature = sign_message(
        keys.external_hmac,
        t=1700000000,
        body=EVENT_BODY,
        exchange="fetcher.job.events",
        routing_key="job.failed",
    )
    assert signature == EVENT_SIGNATURE


@pytest.mark.parametrize(
    "change",
    [
        {"t": 1700000001},
        {"body": WORK_BODY + b" "},
        {"exchange": "x"},
        {"routing_key": "other"},
        {"tenant": "acme"},
        {"job_id": ""},
    ],
)
def test_work_message_rejects_any_change(keys: KeySet, change: dict[str, object]) -> None:
    args: dict[str, object] = {
        "t": 1700000000,
        "body": WORK_BODY,
        "exchange": "",
        "routing_key": WORK_QUEUE,
        "tenant": "",
        "job_id": "0190a1b2-0000-7000-8000-000000000001",
    }
    args.update(change)
    assert not verify_message(keys.internal_hmac, WORK_SIGNATURE, **args)  # type: ignore[arg-type]


def test_wrong_key_fails(keys: KeySet) -> None:
    assert not verify_message(
        keys.external_hmac,
        WORK_SIGNATURE,
        t=1700000000,
        body=WORK_BODY,
        exchange="",
        routing_key=WORK_QUEUE,
        job_id=extract_job_id(WORK_BODY),
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"jobId":"abc"}', "abc"),
        (b'{"a":{"jobId":"nested"},"jobId":"top"}', "top"),
        (b'{"a":{"jobId":"nested"}}', ""),
        (b'{"jobId":123}', ""),
        (b'{"jobId":null}', ""),
        (b'["jobId"]', ""),
        (b'"jobId"', ""),
        (b"", ""),
        (b"{not json", ""),
        (b"\xff\xfe\x00", ""),
        (b"[" * 100_000, ""),
        (b'{"jobId":"' + "é".encode() + b'"}', "é"),
    ],
)
def test_extract_job_id(body: bytes, expected: str) -> None:
    assert extract_job_id(body) == expected
