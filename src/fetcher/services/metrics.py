"""The Prometheus metrics of §2.11 (names exact) and §15.2, on a registry owned by one runtime.

Nothing is registered globally: each runtime builds its own :class:`Metrics`, so tests and
embedded processes never collide.

Every label value comes from a fixed set (§2.11, §13 "Bounded memory"): a value copied from a
request (a method name, a path, a status) would let any client add series, and memory, without
bound. :func:`method_label` and :func:`status_label` map HTTP values into those sets;
:func:`engine_label` and :func:`category_label` map a job's engines and failure category into
closed sets, and :class:`ProductLabels` caps the ``product`` values one process ever uses
(§15.2). docs/metrics.md is the catalogue of every family registered here (a test compares it
with the ``/metrics`` of each mode).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from fetcher import __version__
from fetcher.engine import ErrorCategory
from fetcher.engine.kit import EngineType

__all__ = [
    "CATEGORIES",
    "ENGINES",
    "HTTP_METHODS",
    "HTTP_STATUSES",
    "NONE",
    "OTHER",
    "PRODUCT_LABEL_CAP",
    "Metrics",
    "ProductLabels",
    "category_label",
    "engine_label",
    "method_label",
    "status_label",
]

#: §2.11: the ``method`` values; any other method (methods are case-sensitive) is ``other``.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The statuses the HTTP API answers with (the 2xx of §2 and every status of §2.3); any
#: other is ``other``, so a future bug cannot turn the label into an unbounded one either.
HTTP_STATUSES = frozenset(
    {200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 502, 503}
)
OTHER = "other"
#: §15.2: the ``category`` of a job that did not fail, and the ``engine`` of a job that failed
#: before any datasource was resolved.
NONE = "none"
#: §15.2 ``engine``: one lower-case connection type, ``mixed`` for a job over several types.
ENGINES = frozenset({t.value.lower() for t in EngineType} | {"mixed", NONE})
#: §15.2 ``category``: the §4.5 error categories, ``none`` for a completed job.
CATEGORIES = frozenset({c.value for c in ErrorCategory} | {NONE})
#: §15.2: distinct ``product`` values one process labels; later products are ``other``.
PRODUCT_LABEL_CAP = 50
#: Wait (created → claimed) and run (claimed → terminal) buckets: seconds to an hour.
_JOB_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def method_label(method: str) -> str:
    """The §2.11 ``method`` label: the method when it is one of :data:`HTTP_METHODS`."""
    return method if method in HTTP_METHODS else OTHER


def status_label(status: int) -> str:
    """The ``status`` label: the code when it is one of :data:`HTTP_STATUSES`."""
    return str(status) if status in HTTP_STATUSES else OTHER


def engine_label(types: Iterable[str]) -> str:
    """The §15.2 ``engine`` label of a job over datasources of these connection ``types``."""
    names = {str(t).lower() for t in types}
    if not names:
        return NONE
    if len(names) > 1:
        return "mixed"
    (name,) = names
    return name if name in ENGINES else OTHER


def category_label(category: str | None) -> str:
    """The §15.2 ``category`` label: a §4.5 category, else ``none`` (no failure)."""
    if category is None:
        return NONE
    return category if category in CATEGORIES else OTHER


class ProductLabels:
    """The §15.2 ``product`` label: the first :data:`PRODUCT_LABEL_CAP` distinct products a
    process sees keep their name, every later one is ``other`` (a product name is
    caller-chosen, so without the cap each new one would add series without bound)."""

    def __init__(self, cap: int = PRODUCT_LABEL_CAP) -> None:
        self._cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, product: str) -> str:
        if not product:
            return NONE
        with self._lock:
            if product in self._seen:
                return product
            if len(self._seen) < self._cap:
                self._seen.add(product)
                return product
        return OTHER


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )

    #: §15.2 ``fetcher_build_info{mode}``: ``manager``, ``worker`` or ``embedded`` (empty in
    #: tests that build bare metrics: then no build info series).
    mode: str = ""
    #: §15.2: the bounded ``product`` label of this registry's job metrics.
    product_label: ProductLabels = field(default_factory=ProductLabels)

    def __post_init__(self) -> None:
        r = self.registry
        ProcessCollector(registry=r)  # §15.2 process_*: CPU, memory, open fds, start time
        metrics = {**_contract_families(r), **_production_families(r)}
        for name, metric in metrics.items():  # frozen: the fields are set once, here
            object.__setattr__(self, name, metric)
        if self.mode:
            self.build_info.labels(__version__, self.mode).set(1)

    http_requests: Counter = field(init=False)
    http_duration: Histogram = field(init=False)
    jobs_created: Counter = field(init=False)
    jobs_finished: Counter = field(init=False)
    job_duration: Histogram = field(init=False)
    messages_rejected: Counter = field(init=False)
    events_published: Counter = field(init=False)
    outbox_pending: Gauge = field(init=False)
    readyz_up: Gauge = field(init=False)
    build_info: Gauge = field(init=False)
    job_outcomes: Counter = field(init=False)
    job_wait: Histogram = field(init=False)
    job_run: Histogram = field(init=False)
    jobs_in_flight: Gauge = field(init=False)
    jobs_pending: Gauge = field(init=False)
    oldest_pending_age: Gauge = field(init=False)
    outbox_oldest_age: Gauge = field(init=False)


def _contract_families(r: CollectorRegistry) -> dict[str, Counter | Gauge | Histogram]:
    """§2.11: names and label sets exact."""
    return {
        "http_requests": Counter(
            "fetcher_http_requests_total",
            "HTTP requests",
            ["method", "route", "status"],
            registry=r,
        ),
        "http_duration": Histogram(
            "fetcher_http_request_duration_seconds",
            "HTTP request duration",
            ["method", "route"],
            registry=r,
        ),
        "jobs_created": Counter(
            "fetcher_jobs_created_total",
            "Jobs accepted by the Manager",
            ["outcome"],
            registry=r,
        ),
        "jobs_finished": Counter(
            "fetcher_jobs_finished_total",
            "Jobs that reached a terminal status",
            ["status"],
            registry=r,
        ),
        "job_duration": Histogram(
            "fetcher_job_duration_seconds",
            "Job duration from claim to terminal status",
            registry=r,
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
        ),
        "messages_rejected": Counter(
            "fetcher_work_messages_rejected_total",
            "Work messages dead-lettered",
            ["reason"],
            registry=r,
        ),
        "events_published": Counter(
            "fetcher_events_published_total", "Job events published", ["type"], registry=r
        ),
        "outbox_pending": Gauge(
            "fetcher_outbox_pending", "Outbox rows not yet published", registry=r
        ),
        "readyz_up": Gauge(
            "fetcher_readyz_check_up",
            "Readiness check result (1 up, 0 down)",
            ["check"],
            registry=r,
        ),
    }


def _production_families(r: CollectorRegistry) -> dict[str, Counter | Gauge | Histogram]:
    """§15.2 additions (new names; the §2.11 families keep their label sets)."""
    return {
        "build_info": Gauge(
            "fetcher_build_info",
            "Always 1: the process's package version and mode (manager, worker, embedded)",
            ["version", "mode"],
            registry=r,
        ),
        "job_outcomes": Counter(
            "fetcher_job_outcomes_total",
            "Jobs that reached a terminal status, by product, engine and error category",
            ["status", "product", "engine", "category"],
            registry=r,
        ),
        "job_wait": Histogram(
            "fetcher_job_wait_seconds",
            "Time a job waited from creation to its claim by a Worker",
            registry=r,
            buckets=_JOB_BUCKETS,
        ),
        "job_run": Histogram(
            "fetcher_job_run_seconds",
            "Time a job ran from its claim to its terminal status, by engine",
            ["engine"],
            registry=r,
            buckets=_JOB_BUCKETS,
        ),
        "jobs_in_flight": Gauge(
            "fetcher_worker_jobs_in_flight",
            "Jobs this process is running now",
            registry=r,
        ),
        "jobs_pending": Gauge(
            "fetcher_jobs_pending",
            "Jobs waiting for a Worker (status pending), read at scrape",
            registry=r,
        ),
        "oldest_pending_age": Gauge(
            "fetcher_jobs_oldest_pending_age_seconds",
            "Age of the oldest pending job (0 when none), read at scrape",
            registry=r,
        ),
        "outbox_oldest_age": Gauge(
            "fetcher_outbox_oldest_pending_age_seconds",
            "Age of the oldest outbox row not yet published (0 when none), read at scrape",
            registry=r,
        ),
    }
