"""The OCI image, built here with ``podman build --isolation chroot`` on a debootstrap Debian
base, then exercised in its own file system (see image_tools: ``podman run`` is refused by this
sandbox). Slow (a build of about a minute and a half, plus the base the first time): marked
``image`` and run by ``make image``, not ``make test``.

``make image`` builds the image it keeps (``IMAGE``, scripts/image.sh) and names it here in
``FETCHER_IMAGE``: these tests then check that very image and leave it in place. Without
``FETCHER_IMAGE`` they build one of their own and remove it afterwards.

Figures (size, build time, start time, idle RSS) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import tarfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fetcher.crypto import generate_master_key
from tests.deploy import image_tools
from tests.deploy.image_tools import ImageProcess
from tests.deploy.layout import ROOT
from tests.services import services_required

pytestmark = pytest.mark.image

TAG = "localhost/fetcher:image-test"
#: The image is everything the Worker needs for every connector; this catches a stray cache,
#: toolchain or source tree (376 MB measured at the time of writing).
SIZE_BUDGET_MB = 450
#: The HEALTHCHECK's --start-period.
START_BUDGET_S = 30.0
REVISION = image_tools.git("rev-parse", "HEAD")
SOURCE = image_tools.git("remote", "get-url", "origin") or ROOT.as_uri()
#: Compiler drivers, compiler proper and assembler, plain or versioned or target-prefixed
#: (gcc, gcc-12, x86_64-linux-gnu-gcc-12, cc1, …). Runtime libraries such as gcc-12-base's
#: libgcc_s are not compilers and stay.
COMPILER = re.compile(
    r"(?:[\w-]+-linux-gnu-)?(?:gcc|g\+\+|c\+\+|cc|clang|tcc|as|ld)(?:-[\d.]+)?|cc1\w*"
)


def _figure(name: str, value: str) -> None:
    print(f"\nimage figure: {name} = {value}", flush=True)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    missing = [tool for tool in ("podman", "debootstrap", "chroot") if not shutil.which(tool)]
    if missing:
        reason = f"{', '.join(missing)} not installed (scripts/system-packages.sh image)"
        if services_required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    kept = os.environ.get("FETCHER_IMAGE", "")
    if kept:
        yield image_tools.podman("image", "inspect", "--format={{.Id}}", kept)
        return
    started = time.monotonic()
    image_id = image_tools.build_image(TAG, REVISION, SOURCE)
    _figure("build seconds", f"{time.monotonic() - started:.1f}")
    try:
        yield image_id
    finally:
        image_tools.podman("rmi", "--force", image_id)


@pytest.fixture(scope="module")
def config(image: str) -> dict[str, Any]:
    found: dict[str, Any] = image_tools.inspect(image)["Config"]
    return found


@pytest.fixture(scope="module")
def process(image: str, config: dict[str, Any]) -> Iterator[ImageProcess]:
    with image_tools.mounted(image) as rootfs:
        yield ImageProcess.of(rootfs, config)


def test_runs_as_the_non_root_fetcher_user(process: ImageProcess) -> None:
    assert process.user == "10001:10001"
    ids = process.run(["id", "-u", "-n"])
    assert ids.returncode == 0, ids.stderr
    assert ids.stdout.strip() == "fetcher"
    home = process.rootfs / "var/lib/fetcher"
    assert (home.stat().st_uid, home.stat().st_mode & 0o777) == (10001, 0o700)


def test_fetcher_demo_passes_inside_the_image(process: ImageProcess) -> None:
    result = process.run([*process.entrypoint, "demo"], timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "demo finished: every step passed." in result.stdout


def test_embedded_mode_starts_healthy_and_drains_on_sigterm(process: ImageProcess) -> None:
    """``CMD`` (``run``) in embedded mode, the master key from a ``_FILE``: the image's own
    HEALTHCHECK command fails before the start and passes within its start period."""
    key_file = process.rootfs / "var/lib/fetcher/app_enc_key"
    key_file.write_text(generate_master_key() + "\n")
    os.chown(key_file, 10001, 10001)
    key_file.chmod(0o400)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "APP_ENC_KEY_FILE": "/var/lib/fetcher/app_enc_key",
        "SERVER_ADDRESS": f"127.0.0.1:{port}",
        "READYZ_DRAIN_DELAY_SEC": "1",
    }
    assert process.run(["fetcher-healthcheck"], env).returncode == 1  # nothing listens yet
    server = process.start([*process.entrypoint, "run"], env)
    try:
        seconds = image_tools.wait_healthy(process, env, START_BUDGET_S)
        _figure("start to healthy seconds (embedded)", f"{seconds:.2f}")
        _figure("idle RSS MiB (embedded, main process)", f"{image_tools.rss_mib(server.pid):.0f}")
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=60)
    assert server.returncode == 0, output[-3000:]


def test_the_c_extension_is_built_into_the_image(process: ImageProcess) -> None:
    """The build stage compiles ``fetcher.adapters.jsonlayout._native`` (optional for ``pip
    install``, not for the image): it imports and lays a value out in the image."""
    script = (
        "import sys; from fetcher.adapters import jsonlayout as j; "
        "sys.exit(3) if not j.NATIVE else sys.stdout.buffer.write(j.layout_value(sys.argv[1], 0))"
    )
    result = process.run(["/opt/fetcher/bin/python", "-c", script, '{"b":1,"a":[]}'])
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout == '{\n  "a": [],\n  "b": 1\n}'


def test_no_compiler_no_git_no_build_leftovers(process: ImageProcess) -> None:
    found: list[str] = []
    for directory, subdirs, files in os.walk(process.rootfs):
        relative = Path(directory).relative_to(process.rootfs)
        if relative.parts[:1] in (("proc",), ("sys",), ("dev",)):
            subdirs.clear()
            continue
        found += [str(relative / d) for d in subdirs if d == ".git"]
        found += [
            str(relative / f)
            for f in files
            if COMPILER.fullmatch(f) and os.access(Path(directory) / f, os.X_OK)
        ]
    assert not found, found
    for leftover in ("src", "wheels", "run/secrets/pip-ca", "root/.cache/pip"):
        assert not (process.rootfs / leftover).exists(), leftover
    assert not list((process.rootfs / "opt/fetcher/bin").glob("pip*"))


def test_no_secret_in_the_configuration(config: dict[str, Any]) -> None:
    names = {entry.split("=", 1)[0] for entry in config["Env"]}
    secrets = {"APP_ENC_KEY", "DATABASE_URL", "RABBITMQ_DEFAULT_PASS", "AUTH_JWT_SECRET"}
    assert not names & {*secrets, "OBJECT_STORAGE_SECRET_KEY", "PIP_CERT"}


def test_labels_healthcheck_and_size(image: str, config: dict[str, Any]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == project["version"]
    assert labels["org.opencontainers.image.revision"] == REVISION
    assert labels["org.opencontainers.image.source"] == SOURCE
    # podman reports the health check at the top level of `image inspect`, Docker in Config.
    healthcheck = image_tools.inspect(image).get("Healthcheck") or config["Healthcheck"]
    assert healthcheck["Test"] == ["CMD", "fetcher-healthcheck"]
    assert config["Volumes"] == {"/var/lib/fetcher": {}}
    size_mb = image_tools.inspect(image)["Size"] / 1e6
    _figure("size MB", f"{size_mb:.0f}")
    assert size_mb < SIZE_BUDGET_MB


def test_report_and_oci_archive(image: str, tmp_path: Path) -> None:
    """``scripts/image.sh report`` (the end of ``make image``): the image's ID, size and
    digest, and with a path an OCI archive (``podman save --format oci-archive``) whose index
    names one manifest; a path inside the repository is refused before anything is written."""
    inside = image_tools.image_script("report", image, str(ROOT / "fetcher.oci.tar"))
    assert inside.returncode == 2, inside.stderr
    assert not (ROOT / "fetcher.oci.tar").exists()
    archive = tmp_path / "fetcher.oci.tar"
    try:
        done = image_tools.image_script("report", image, str(archive))
        assert done.returncode == 0, done.stderr[-3000:]
        lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
        assert lines["image id"] == image
        assert int(lines["image size"].removesuffix(" bytes")) > 0
        assert int(lines["archive size"].removesuffix(" bytes")) == archive.stat().st_size
        with tarfile.open(archive) as tar:
            layout = json.load(tar.extractfile("oci-layout"))  # type: ignore[arg-type]
            index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        assert layout == {"imageLayoutVersion": "1.0.0"}
        (manifest,) = index["manifests"]
        assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        assert lines["archive manifest digest"] == manifest["digest"]
        _figure("OCI archive MB", f"{archive.stat().st_size / 1e6:.0f}")
    finally:
        archive.unlink(missing_ok=True)
