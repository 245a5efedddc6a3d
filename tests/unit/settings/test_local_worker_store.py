"""``OBJECT_STORAGE_LOCAL_WORKER`` (issue 23, not in the contract): a Worker stores its results
in ``OBJECT_STORAGE_LOCAL_DIR`` only when this explicit opt-in says so (one host, benchmarks).
Without it a Worker with no S3 endpoint is still refused (§9.3); a malformed value, an S3
setting beside it or a missing directory refuse the start too."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from fetcher.adapters.objectstore.local import LocalObjectStore
from fetcher.bootstrap import _open_objects
from fetcher.settings import Mode, Settings, StartupRefused

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
#: A complete Worker configuration but for its object storage.
WORKER = {
    "FETCHER_MODE": "worker",
    "APP_ENC_KEY": KEY,
    "DATABASE_URL": "postgresql://reader@127.0.0.1:5432/fetcher",
    "RABBITMQ_HOST": "127.0.0.1",
    "STREAMING_ENABLED": "true",
    "RABBITMQ_JOB_EVENTS_EXCHANGE": "fetcher.job.events",
    "STREAMING_CLOUDEVENTS_SOURCE": "//lerian.fetcher/worker",
}
S3 = {"OBJECT_STORAGE_ENDPOINT": "http://127.0.0.1:8333", "OBJECT_STORAGE_BUCKET": "results"}


def _refusal(env: dict[str, str]) -> str:
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env(env)
    return caught.value.reason


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"OBJECT_STORAGE_LOCAL_DIR": "/srv/objects"},
        {"OBJECT_STORAGE_LOCAL_WORKER": "false", "OBJECT_STORAGE_LOCAL_DIR": "/srv/objects"},
        {"OBJECT_STORAGE_LOCAL_WORKER": " ", "OBJECT_STORAGE_LOCAL_DIR": "/srv/objects"},
    ],
)
def test_without_the_opt_in_a_worker_without_s3_is_still_refused(extra: dict[str, str]) -> None:
    assert _refusal({**WORKER, **extra}) == "object storage is not configured"


def test_by_default_a_worker_stores_in_s3() -> None:
    storage = Settings.from_env({**WORKER, **S3}).object_storage
    assert storage.endpoint == "http://127.0.0.1:8333"
    assert storage.bucket == "results"


@pytest.mark.parametrize("value", ["true", " TRUE "])
def test_the_opt_in_with_a_directory_is_accepted(value: str) -> None:
    settings = Settings.from_env(
        {**WORKER, "OBJECT_STORAGE_LOCAL_WORKER": value, "OBJECT_STORAGE_LOCAL_DIR": "/srv/o"}
    )
    assert settings.mode is Mode.WORKER
    assert settings.object_storage.endpoint is None
    assert settings.object_storage.local_dir == "/srv/o"


EXCLUDES = (
    "OBJECT_STORAGE_LOCAL_WORKER=true excludes OBJECT_STORAGE_ENDPOINT and OBJECT_STORAGE_BUCKET"
)
REQUIRES = "OBJECT_STORAGE_LOCAL_WORKER=true requires OBJECT_STORAGE_LOCAL_DIR"


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({}, REQUIRES),
        ({"OBJECT_STORAGE_LOCAL_DIR": "  "}, REQUIRES),
        ({"OBJECT_STORAGE_LOCAL_DIR": "/srv/o", **S3}, EXCLUDES),
        ({"OBJECT_STORAGE_LOCAL_DIR": "/srv/o", "OBJECT_STORAGE_BUCKET": "results"}, EXCLUDES),
        ({"OBJECT_STORAGE_LOCAL_DIR": "/srv/o", "OBJECT_STORAGE_ENDPOINT": "http://s3"}, EXCLUDES),
    ],
)
def test_the_opt_in_needs_a_directory_and_no_s3_setting(extra: dict[str, str], reason: str) -> None:
    assert _refusal({**WORKER, "OBJECT_STORAGE_LOCAL_WORKER": "true", **extra}) == reason


@pytest.mark.parametrize("mode", ["worker", "manager", "embedded"])
@pytest.mark.parametrize("value", ["yes", "1", "on", "local"])
def test_a_malformed_value_refuses_the_start_in_every_mode(mode: str, value: str) -> None:
    env = {**WORKER, **S3, "FETCHER_MODE": mode, "OBJECT_STORAGE_LOCAL_WORKER": value}
    if mode == "embedded":
        env = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY, "OBJECT_STORAGE_LOCAL_WORKER": value}
    assert _refusal(env) == "invalid value for OBJECT_STORAGE_LOCAL_WORKER"


def test_other_modes_are_unchanged_by_the_opt_in() -> None:
    """Embedded mode uses the local store without an endpoint anyway, and with one it still
    stores in S3; the Manager opens no object store."""
    embedded = {
        "FETCHER_MODE": "embedded",
        "APP_ENC_KEY": KEY,
        "OBJECT_STORAGE_LOCAL_WORKER": "true",
    }
    assert Settings.from_env(embedded).object_storage.endpoint is None
    with_s3 = Settings.from_env({**embedded, **S3}).object_storage
    assert with_s3.endpoint == S3["OBJECT_STORAGE_ENDPOINT"]
    manager = {**WORKER, **S3, "FETCHER_MODE": "manager", "OBJECT_STORAGE_LOCAL_WORKER": "true"}
    assert Settings.from_env(manager).mode is Mode.MANAGER


async def test_the_worker_then_writes_to_the_local_directory(tmp_path: Path) -> None:
    """The composition root's own choice (``bootstrap._open_objects``): the local store, rooted
    at the directory, which it creates."""
    root = tmp_path / "objects"
    settings = Settings.from_env(
        {**WORKER, "OBJECT_STORAGE_LOCAL_WORKER": "true", "OBJECT_STORAGE_LOCAL_DIR": str(root)}
    )
    async with AsyncExitStack() as stack:
        store = await _open_objects(settings, stack)
        assert isinstance(store, LocalObjectStore)
        async with store.open_writer("external-data/job.json") as writer:
            await writer.write(b"sealed")
    assert (root / "external-data" / "job.json").read_bytes() == b"sealed"
