"""``make soak``: a steady 5 jobs/s on the real stack (one Manager, two Workers) for a while,
sampling every process every 10 s.

Per process (Manager, each Worker): RSS (``/proc/<pid>/status``), open file descriptors
(``/proc/<pid>/fd``), metadata-store connections and AMQP connections (its established
sockets to the chaos proxies, found through ``/proc/net/tcp`` inodes), and AMQP channels
(``rabbitmqctl list_connections``, matched through the proxy's port map). The report gives
each series' least-squares slope per 10 minutes, over the whole run and after a warm-up,
and a PNG of the samples.

Writes ``bench/results/soak.json`` and ``bench/results/soak.png`` (``--out-prefix``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.chaos.proxy import ChaosProxy
from tests.chaos.scenarios import FAST_TABLE, JOB_LIMITS
from tests.chaos.stack import ChaosStack, chaos_stack
from tests.e2e.harness import PRODUCT, FetcherProcess, unique

from bench.support import RESULTS

SAMPLE_SECONDS = 10.0
WARMUP_SECONDS = 120.0
METRICS = ("rss_mib", "fds", "db_connections", "amqp_connections", "amqp_channels")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def tcp_table() -> dict[str, tuple[int, int]]:
    """inode → (local port, remote port) of every established IPv4 TCP socket."""
    table = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        if cols[3] != "01":  # ESTABLISHED
            continue
        local, remote, inode = cols[1], cols[2], cols[9]
        table[inode] = (int(local.split(":")[1], 16), int(remote.split(":")[1], 16))
    return table


def amqp_channels_by_peer_port() -> dict[int, int] | None:
    """RabbitMQ's view: client port → channels (``None`` when rabbitmqctl is unavailable)."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        return None
    try:
        out = subprocess.run(
            [ctl, "-q", "list_connections", "peer_port", "channels"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    result = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            result[int(parts[0])] = int(parts[1])
    return result


def sample_process(
    process: FetcherProcess,
    table: dict[str, tuple[int, int]],
    metadata: ChaosProxy,
    broker: ChaosProxy,
    channels: dict[int, int] | None,
) -> dict[str, float | None]:
    sockets = [table[i] for i in socket_inodes(process.pid) if i in table]
    amqp_ports = [local for local, remote in sockets if remote == broker.port]
    upstream = broker.peers()
    return {
        "rss_mib": round(rss_mib(process.pid), 2),
        "fds": len(os.listdir(f"/proc/{process.pid}/fd")),
        "db_connections": sum(remote == metadata.port for _, remote in sockets),
        "amqp_connections": len(amqp_ports),
        "amqp_channels": None
        if channels is None
        else sum(channels.get(upstream.get(port, -1), 0) for port in amqp_ports),
    }


async def sampler(
    stack: ChaosStack, began: float, out: list[dict[str, Any]], stop: asyncio.Event
) -> None:
    processes = {"manager": stack.manager} | {
        f"worker{i + 1}": w for i, w in enumerate(stack.workers)
    }
    while not stop.is_set():
        channels = await asyncio.to_thread(amqp_channels_by_peer_port)
        table = tcp_table()
        row: dict[str, Any] = {"t": round(time.monotonic() - began, 1)}
        for name, process in processes.items():
            row[name] = sample_process(
                process, table, stack.proxies.metadata, stack.proxies.broker, channels
            )
        out.append(row)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)


async def load(
    stack: ChaosStack, rate: float, seconds: float, answers: list[tuple[int, float]]
) -> None:
    """Open-loop submissions at ``rate`` per second; records (HTTP status, latency)."""

    async def one() -> None:
        body = {
            "dataRequest": {"mappedFields": FAST_TABLE, "limits": JOB_LIMITS},
            "metadata": {"source": PRODUCT, "correlationId": unique("soak"), "scenario": "soak"},
        }
        started = time.monotonic()
        try:
            response = await stack.launcher.http.post(f"{stack.api.base_url}/v1/fetcher", json=body)
            answers.append((response.status_code, time.monotonic() - started))
        except Exception:
            answers.append((0, time.monotonic() - started))

    began = time.monotonic()
    tasks: set[asyncio.Task[None]] = set()
    for i in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, began + i / rate - time.monotonic()))
        task = asyncio.create_task(one())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)


def slope_per_10min(points: Sequence[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return round(cov / var * 600, 3)


def slopes(samples: list[dict[str, Any]], after: float) -> dict[str, dict[str, float | None]]:
    names = [k for k in samples[0] if k != "t"]
    report: dict[str, dict[str, float | None]] = {}
    for name in names:
        report[name] = {}
        for metric in METRICS:
            pts = [
                (s["t"], float(s[name][metric]))
                for s in samples
                if s["t"] >= after and s[name][metric] is not None
            ]
            report[name][metric] = slope_per_10min(pts)
    return report


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [k for k in samples[0] if k != "t"]
    fig, axes = plt.subplots(len(METRICS), 1, figsize=(9, 2.3 * len(METRICS)), sharex=True)
    minutes = [s["t"] / 60 for s in samples]
    for axis, metric in zip(axes, METRICS, strict=True):
        for name in names:
            values = [s[name][metric] for s in samples]
            axis.plot(minutes, [float("nan") if v is None else v for v in values], label=name)
        axis.set_ylabel(metric)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small")
    axes[-1].set_xlabel("minutes")
    fig.suptitle("Soak: 5 jobs/s, one Manager and two Workers")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


async def run(minutes: float, rate: float, log_dir: Path) -> dict[str, Any]:
    samples: list[dict[str, Any]] = []
    answers: list[tuple[int, float]] = []
    async with chaos_stack(log_dir, workers=2) as stack:
        began = time.monotonic()
        stop = asyncio.Event()
        sampling = asyncio.create_task(sampler(stack, began, samples, stop))
        await load(stack, rate, minutes * 60, answers)
        await asyncio.sleep(15)  # the last jobs finish
        stop.set()
        await sampling
        _, rows = stack.metadata.query(
            "SELECT status, count(*) FROM jobs GROUP BY status ORDER BY status"
        )
    latencies = sorted(latency for _, latency in answers)
    return {
        "minutes": minutes,
        "rate_per_second": rate,
        "submitted": len(answers),
        "api_success": round(sum(s in (200, 202) for s, _ in answers) / max(1, len(answers)), 4),
        "api_p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 3) if latencies else None,
        "jobs_by_status": {str(status): int(count) for status, count in rows},
        "sample_seconds": SAMPLE_SECONDS,
        "warmup_seconds": WARMUP_SECONDS,
        "slopes_per_10min_all": slopes(samples, 0.0),
        "slopes_per_10min_after_warmup": slopes(samples, WARMUP_SECONDS),
        "samples": samples,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        "| process | RSS MiB start → end | RSS slope MiB/10 min (after warm-up) | fds slope "
        "| DB conns slope | AMQP channels slope |",
        "|---|---|---|---|---|---|",
    ]
    first, last = report["samples"][0], report["samples"][-1]
    for name, slope in report["slopes_per_10min_after_warmup"].items():
        lines.append(
            f"| {name} | {first[name]['rss_mib']:.1f} → {last[name]['rss_mib']:.1f} "
            f"| {slope['rss_mib']} | {slope['fds']} | {slope['db_connections']} "
            f"| {slope['amqp_channels']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--out-prefix", type=Path, default=RESULTS / "soak")
    args = parser.parse_args(argv)
    logs = Path(tempfile.mkdtemp(prefix="fetcher-soak-"))
    print(f"[soak] {args.minutes} min at {args.rate}/s; process logs in {logs}", flush=True)
    report = asyncio.run(run(args.minutes, args.rate, logs))
    args.out_prefix.parent.mkdir(parents=True, exist_ok=True)
    json_path = args.out_prefix.with_suffix(".json")
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    plot(report["samples"], args.out_prefix.with_suffix(".png"))
    print(table(report))
    print(json.dumps({k: v for k, v in report.items() if k not in ("samples",)}, indent=1))
    print(f"written to {json_path} and {args.out_prefix.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
