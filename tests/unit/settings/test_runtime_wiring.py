"""What the composition root wires for speed (issue 12), on the real ``build_runtime``:
``ENCODER_PROCESS_ENABLED`` reaches the connectors (embedded mode's runtime hands its
PostgreSQL connectors a batch encoder, which starts its process when first asked to, unless
the setting turns it off, and stops the process when the runtime closes), and the stored
object's base64 is SIMD ``pybase64`` (its bytes: ``tests/unit/crypto/test_fast_base64.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pybase64
import pytest

from fetcher.adapters.jsonlayout.encoder_process import BatchEncoder
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.bootstrap import build_runtime
from fetcher.settings import Settings

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="


def _embedded(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env(
        {
            "FETCHER_MODE": "embedded",
            "APP_ENC_KEY": KEY,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'meta.db'}",
            "OBJECT_STORAGE_LOCAL_DIR": str(tmp_path / "objects"),
            **env,
        }
    )


async def _encoder_of(settings: Settings) -> tuple[BatchEncoder | None, bool]:
    """The registry's encoder, and whether it ran a batch, while the runtime is open."""
    async with build_runtime(settings) as runtime:
        registry = runtime.registry
        assert isinstance(registry, SqlConnectorRegistry)
        encoder = registry._encoder
        if encoder is None:
            return None, False
        await asyncio.sleep(0.5)
        assert encoder.submit(("a",), [["x"]], (), {}) is None  # no process until a stream
        encoder.start_soon()  # what the PostgreSQL connector does when it streams
        for _ in range(200):  # it starts in the background
            future = encoder.submit(("a",), [["x"]], (), {})
            if future is not None:
                break
            await asyncio.sleep(0.05)
        assert future is not None
        encoded = await asyncio.wrap_future(future)
        assert encoded == b'{\n        "a": "x"\n      }'
    return encoder, True


@pytest.mark.parametrize("value", ["", "true"])
async def test_embedded_mode_encodes_in_a_second_process(tmp_path: Path, value: str) -> None:
    encoder, ran = await _encoder_of(_embedded(tmp_path, ENCODER_PROCESS_ENABLED=value))
    assert encoder is not None
    assert ran
    assert encoder.submit(("a",), [["x"]], (), {}) is None  # stopped with the runtime


async def test_the_setting_turns_it_off(tmp_path: Path) -> None:
    encoder, _ = await _encoder_of(_embedded(tmp_path, ENCODER_PROCESS_ENABLED="false"))
    assert encoder is None


async def test_the_stored_objects_base64_is_pybase64(tmp_path: Path) -> None:
    settings = _embedded(tmp_path, ENCODER_PROCESS_ENABLED="false")
    async with build_runtime(settings) as runtime:
        assert runtime.worker is not None
        assert runtime.worker.extraction.b64encode is pybase64.b64encode
