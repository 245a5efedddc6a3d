"""CPU seconds and peak RSS of the processes around a bench job, read from ``/proc`` (Linux).

CPU is user + system ticks of a process (its threads, the exited ones included) and, for a
server, of its whole process tree. A server's tree loses
processes while it is measured: a PostgreSQL backend exits when its client disconnects, and the
job's source connection closes when the job ends. Their CPU is not lost: the kernel adds a
reaped child's user + system time (its own and its reaped descendants') to the parent's
``cutime``/``cstime``, and the postmaster reaps its backends. So :func:`tree_cpu_seconds` sums,
over the live members, ``utime + stime + cutime + cstime``, and the difference of two such
snapshots is exactly what the tree used in between, backends born and gone in between included
(an orphan re-parented outside the tree would be missed; servers reap their own children).

A shared server (the machine's PostgreSQL, MariaDB, SeaweedFS) also serves whatever else runs on
it meanwhile, so its figure is an upper bound of the job's share. :class:`SessionCpu` samples,
in a background thread, the PostgreSQL backends whose process title names one database (the
job's source), for the job's own share; :func:`machine_busy_seconds` shows how busy the whole
machine was.

Peak RSS is ``VmHWM``; :func:`reset_peak` (``/proc/<pid>/clear_refs``) starts it again from the
current RSS, so a peak read after a job is the job's (with whatever the process already held).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from pathlib import Path

__all__ = [
    "CpuMeter",
    "SessionCpu",
    "cpu_seconds",
    "machine_busy_seconds",
    "mariadb_server_pid",
    "process_tree",
    "reset_peak",
    "reset_tree_peaks",
    "s3_server_pid",
    "server_pid",
    "tree_cpu_seconds",
    "tree_figures",
    "vm_hwm_mib",
]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` from field 3 on (``state``): the command name, which may hold
    spaces and parentheses, is cut at its last ``)``."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (``/proc/<pid>/stat`` fields 14 and 15,
    every thread of the process, exited threads included)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / _TICK


def _own_and_reaped(pid: int) -> tuple[int, int]:
    """Ticks of ``pid`` itself (``utime + stime``) and of the children it has reaped
    (``cutime + cstime``)."""
    fields = _stat(pid)
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants, read from ``/proc/<pid>/task/<tid>/children``."""
    pids = [pid]
    for parent in pids:  # grows while it is walked
        with suppress(OSError):
            for task in Path(f"/proc/{parent}/task").iterdir():
                with suppress(OSError):
                    pids += [int(child) for child in (task / "children").read_text().split()]
    return pids


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``'s tree so far: its live members and every child they reaped (see
    the module's docstring); a root that is gone raises ``OSError``.

    A child reaped while the tree is read would be in neither the list nor the root's
    ``cutime`` read before it (a backend exits right as its client's job ends, which is when
    the bench reads the tree), so the root's reaped ticks are read before and after the
    members and the read is taken again when they changed. A deeper member gone between the
    listing and its read is skipped: it is in its parent's ``cutime`` from then on."""
    for _ in range(10):
        _, reaped = _own_and_reaped(pid)
        members = 0
        for member in process_tree(pid)[1:]:
            with suppress(OSError, IndexError, ValueError):
                members += sum(_own_and_reaped(member))
        own, reaped_after = _own_and_reaped(pid)
        if reaped_after == reaped:
            break
    return (own + reaped_after + members) / _TICK


def machine_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine so far, every core (``/proc/stat``'s first line:
    all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _TICK


def server_pid(*names: str) -> int | None:
    """The oldest process whose ``comm`` is one of ``names`` and whose parent's is not: a
    server's root (the postmaster, ``mariadbd``, ``weed``), not one of its children."""
    for stat in sorted(Path("/proc").glob("[0-9]*/stat"), key=lambda p: int(p.parent.name)):
        pid = int(stat.parent.name)
        if _comm(pid) not in names:
            continue
        with suppress(OSError, IndexError, ValueError):
            if _comm(int(_stat(pid)[1])) not in names:
                return pid
    return None


def mariadb_server_pid() -> int | None:
    """The MariaDB (or MySQL) server process; one process, a thread per connection."""
    return server_pid("mariadbd", "mysqld")


def s3_server_pid(port: str = "8333") -> int | None:
    """The SeaweedFS process ``scripts/s3-server.sh`` started for S3 ``port`` (its PID file,
    checked to still be ``weed``), else the first ``weed`` process, else ``None``."""
    default = Path(tempfile.gettempdir()) / f"fetcher-s3-{os.getuid()}-{port}"
    state = Path(os.environ.get("FETCHER_TEST_S3_STATE_DIR", default))
    try:
        pid = int((state / "weed.pid").read_text())
    except (OSError, ValueError):
        return server_pid("weed")
    return pid if _comm(pid) == "weed" else server_pid("weed")


class SessionCpu:
    """CPU seconds of the PostgreSQL backends serving ``database`` between :meth:`start` and
    :meth:`stop`.

    The postmaster's children are listed every ``interval`` seconds in a thread; a backend
    whose process title (``postgres: … <user> <database> <client> <state>``) names the
    database counts from its CPU at :meth:`start` (0 when born later) to the last sample taken
    of it. A backend that exits between two samples loses what it used since the last one (at
    most ``interval`` of its work, at the end of a job, where its client no longer fetches)."""

    def __init__(self, postmaster: int, database: str, interval: float = 0.05) -> None:
        self._postmaster = postmaster
        self._needle = f" {database} ".encode()
        self._interval = interval
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _backends(self) -> Iterator[tuple[int, float]]:
        with suppress(OSError):
            children = Path(f"/proc/{self._postmaster}/task/{self._postmaster}/children")
            for pid in (int(p) for p in children.read_text().split()):
                with suppress(OSError, IndexError, ValueError):
                    if self._needle in Path(f"/proc/{pid}/cmdline").read_bytes():
                        yield pid, cpu_seconds(pid)

    def _sample(self) -> None:
        for pid, cpu in self._backends():
            self._last[pid] = cpu

    def _run(self) -> None:
        while not self._done.wait(self._interval):
            self._sample()

    def start(self) -> None:
        self._first = dict(self._backends())
        self._last = dict(self._first)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="session-cpu", daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return sum(cpu - self._first.get(pid, 0.0) for pid, cpu in self._last.items())


class CpuMeter:
    """CPU seconds of named probes between :meth:`start` and :meth:`stop`. A probe returns a
    cumulative figure (e.g. ``lambda: tree_cpu_seconds(pid)``); a ``None`` probe is left out
    (a server that is not running here). ``sessions`` are :class:`SessionCpu` figures."""

    def __init__(
        self,
        probes: Mapping[str, Callable[[], float] | None],
        sessions: Mapping[str, SessionCpu] | None = None,
    ) -> None:
        self._probes = {name: probe for name, probe in probes.items() if probe is not None}
        self._sessions = dict(sessions or {})
        self._before: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        sample = {}
        for name, probe in self._probes.items():
            with suppress(OSError):  # a server that stopped: no figure rather than a wrong one
                sample[name] = probe()
        return sample

    def start(self) -> None:
        for session in self._sessions.values():
            session.start()
        self._before = self._sample()

    def stop(self) -> dict[str, float]:
        after = self._sample()
        figures = {n: after[n] - self._before[n] for n in after if n in self._before}
        for name, session in self._sessions.items():
            figures[name] = session.stop()
        return figures


# --- peak RSS ----------------------------------------------------------------------------


def tree_figures(pid: int) -> tuple[float, float]:
    """Summed ``VmHWM`` (MiB) of :func:`process_tree` (embedded mode's batch encoder process
    and multiprocessing's resource tracker) and the tree's CPU seconds, reaped children
    included (:func:`tree_cpu_seconds`): the peaks of separate processes are
    added, which bounds their peak together from above."""
    peak = 0.0
    for member in process_tree(pid):
        with suppress(OSError, RuntimeError):
            peak += vm_hwm_mib(member)
    return peak, tree_cpu_seconds(pid)


def reset_tree_peaks(pid: int) -> None:
    """:func:`reset_peak` of every member of ``pid``'s tree (before a job)."""
    for member in process_tree(pid):
        with suppress(OSError):
            reset_peak(member)


def vm_hwm_mib(pid: int) -> float:
    """The peak resident set of ``pid`` (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def reset_peak(pid: int) -> None:
    """``echo 5 > /proc/<pid>/clear_refs``: the peak RSS starts again from the current RSS."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
