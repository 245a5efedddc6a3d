"""§15.1 through the process: ``fetcher run`` as a Manager with ``AUTH_MODE=none`` on every
interface and ``ENV_NAME=production`` prints one ``startup refused`` line and exits 1 before
opening its port; with ``AUTH_NONE_ACKNOWLEDGED=true`` the same Manager starts, serves, and
logs §12.1's warn line."""

from __future__ import annotations

import socket

from tests.e2e.conftest import E2E
from tests.e2e.harness import Stack, free_port

pytestmark = E2E

REFUSAL = (
    "startup refused: AUTH_MODE=none on a non-loopback address with ENV_NAME=production "
    "requires AUTH_NONE_ACKNOWLEDGED=true\n"
)
WARNING = "authentication is off: every caller can manage connections, create jobs and read events"


async def test_an_unauthenticated_production_manager_is_refused_before_any_port(
    stack: Stack,
) -> None:
    """The port is held by the test on every interface meanwhile: a process that bound it
    first would have failed differently (address in use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("0.0.0.0", 0))  # noqa: S104 - the refusal is about this very bind
        holder.listen(1)
        port = holder.getsockname()[1]
        refused = await stack.launcher.run_to_exit(
            unset=["AUTH_MODE"],
            FETCHER_MODE="manager",
            ENV_NAME="production",
            SERVER_ADDRESS=f"0.0.0.0:{port}",
        )
    assert (refused.returncode, refused.stderr, refused.stdout) == (1, REFUSAL, "")


async def test_the_acknowledgement_lets_it_start_with_the_warning(stack: Stack) -> None:
    port = free_port()
    manager = stack.launcher.start_manager(
        ENV_NAME="production", AUTH_NONE_ACKNOWLEDGED="true", SERVER_ADDRESS=f":{port}"
    )
    manager.base_url = f"http://127.0.0.1:{port}"
    try:
        await manager.wait_healthy(stack.launcher.http)
        await manager.wait_for_log(WARNING)
    finally:
        code = await manager.terminate()
    assert code == 0, manager.log_tail()
    stack.launcher.assert_no_secrets(manager)
