"""The Prometheus metrics of §2.11 (names exact), on a registry owned by one runtime.

Nothing is registered globally: each runtime builds its own :class:`Metrics`, so tests and
embedded processes never collide.

Every label value comes from a fixed set (§2.11, §13 "Bounded memory"): a value copied from a
request (a method name, a path, a status) would let any client add series, and memory, without
bound. :func:`method_label` and :func:`status_label` map HTTP values into those sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["HTTP_METHODS", "HTTP_STATUSES", "OTHER", "Metrics", "method_label", "status_label"]

#: §2.11: the ``method`` values; any other method (methods are case-sensitive) is ``other``.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The statuses the HTTP API answers with (the 2xx of §2 and every status of §2.3); any
#: other is ``other``, so a future bug cannot turn the label into an unbounded one either.
HTTP_STATUSES = frozenset(
    {200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 502, 503}
)
OTHER = "other"


def method_label(method: str) -> str:
    """The §2.11 ``method`` label: the method when it is one of :data:`HTTP_METHODS`."""
    return method if method in HTTP_METHODS else OTHER


def status_label(status: int) -> str:
    """The ``status`` label: the code when it is one of :data:`HTTP_STATUSES`."""
    return str(status) if status in HTTP_STATUSES else OTHER


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )

    def __post_init__(self) -> None:
        r = self.registry
        metrics = {
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
        for name, metric in metrics.items():  # frozen: the fields are set once, here
            object.__setattr__(self, name, metric)

    http_requests: Counter = field(init=False)
    http_duration: Histogram = field(init=False)
    jobs_created: Counter = field(init=False)
    jobs_finished: Counter = field(init=False)
    job_duration: Histogram = field(init=False)
    messages_rejected: Counter = field(init=False)
    events_published: Counter = field(init=False)
    outbox_pending: Gauge = field(init=False)
    readyz_up: Gauge = field(init=False)
