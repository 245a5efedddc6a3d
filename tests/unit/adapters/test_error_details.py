"""The broker and object-store error details hide the credentials they know (§8.7 step 1,
through ``crypto.Redactor``) and a URL's userinfo (§9.2), and keep the rest readable."""

from __future__ import annotations

import pytest

from fetcher.adapters.messaging.rabbitmq import BrokerError, map_rabbitmq_errors
from fetcher.adapters.objectstore.s3 import map_s3_errors
from fetcher.engine.errors import EngineError

PASSWORD = "hunter22-secret"


def test_broker_detail_hides_the_password_and_the_userinfo() -> None:
    text = f"cannot connect to amqp://guest:{PASSWORD}@broker.example:5672/ ({PASSWORD})"
    with pytest.raises(BrokerError) as caught, map_rabbitmq_errors("failed", secrets=(PASSWORD,)):
        raise ConnectionError(text)
    detail = caught.value.detail or ""
    assert PASSWORD not in detail
    assert detail == (
        "ConnectionError: cannot connect to amqp://[redacted]@broker.example:5672/ ([redacted])"
    )


def test_s3_detail_hides_both_keys_and_keeps_the_endpoint() -> None:
    key_id, secret = "AKIAEXAMPLEKEY", "s3cr3t/" + "x" * 33
    text = f"could not reach http://127.0.0.1:8333 with {key_id} and {secret}{secret}"
    with (
        pytest.raises(EngineError) as caught,
        map_s3_errors("failed", secrets=(secret, key_id, None)),
    ):
        raise OSError(text)
    assert (
        caught.value.detail
        == "could not reach http://127.0.0.1:8333 with [redacted] and [redacted][redacted]"
    )
