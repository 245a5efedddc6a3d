"""What the job methods return: typed, read-only objects over the API's JSON (issue 33).

``submit`` returns a :class:`Submission`; ``get_job``, ``wait`` and every item of
``jobs.list``/``list_jobs`` a :class:`Job`. Both are the same kind of object: attributes in
Python's spelling (``job.status``, ``job.result_path``, ``submission.job_id``) **and** the
read-only mapping of the answer's JSON keys (``job["status"]``, ``job.get("resultPath")``,
``dict(job)``), so code written against the dict answers keeps working and a ``Job`` can be
handed to :func:`fetcher.consumer.open_result` as before. :meth:`ApiObject.to_dict` gives a
plain ``dict`` (for ``json.dumps``).

An object is built only from an answer whose required keys have the right JSON types;
anything else is :class:`~fetcher.client.errors.InvalidAnswerError` naming the key, never the
value (a hostile server chooses the value).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fetcher.client.errors import InvalidAnswerError

__all__ = ["ApiObject", "Job", "Submission"]


def _required_text(data: Mapping[str, Any], key: str, what: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise InvalidAnswerError(f"{what} has no text {key!r}")
    return value


class ApiObject(Mapping[str, Any]):
    """An answer object: a read-only mapping of its JSON keys with typed attributes on top.
    Equal to any mapping with the same keys and values (a plain ``dict`` included)."""

    __slots__ = ("_data",)
    _kind = "answer"
    _required: tuple[str, ...] = ()

    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping):
            raise InvalidAnswerError(f"the {self._kind} is not a JSON object")
        for key in self._required:
            _required_text(data, key, f"the {self._kind}")
        self._data: dict[str, Any] = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def to_dict(self) -> dict[str, Any]:
        """The answer's JSON object, as a new plain ``dict``."""
        return dict(self._data)


class Job(ApiObject):
    """A job as ``GET /v1/fetcher/{id}`` answers it (§4.6), or an item of ``GET /v1/fetcher``
    (where ``mappedFields``/``filters`` over 4 KiB are left out and named in ``truncated``)."""

    __slots__ = ()
    _kind = "job answer"
    _required = ("id", "status", "createdAt")

    @property
    def id(self) -> str:
        return str(self._data["id"])

    @property
    def status(self) -> str:
        """``pending``, ``processing``, ``completed`` or ``failed``."""
        return str(self._data["status"])

    @property
    def created_at(self) -> str:
        return str(self._data["createdAt"])

    @property
    def completed_at(self) -> str | None:
        return self._text("completedAt")

    @property
    def metadata(self) -> dict[str, Any]:
        """The job's metadata (``{}`` when absent); a failed job's ``error`` is in it."""
        value = self._data.get("metadata")
        return dict(value) if isinstance(value, dict) else {}

    @property
    def error(self) -> Any:
        """A failed job's ``metadata.error`` (the §4.5 text), else None."""
        return self.metadata.get("error") if self.status == "failed" else None

    @property
    def product(self) -> str | None:
        """The job's ``metadata.source``."""
        value = self.metadata.get("source")
        return value if isinstance(value, str) else None

    @property
    def mapped_fields(self) -> dict[str, Any] | None:
        value = self._data.get("mappedFields")
        return dict(value) if isinstance(value, dict) else None

    @property
    def filters(self) -> dict[str, Any] | None:
        value = self._data.get("filters")
        return dict(value) if isinstance(value, dict) else None

    @property
    def result_path(self) -> str | None:
        return self._text("resultPath")

    @property
    def result_hmac(self) -> str | None:
        return self._text("resultHmac")

    @property
    def request_hash(self) -> str | None:
        return self._text("requestHash")

    @property
    def created_by(self) -> str | None:
        return self._text("createdBy")

    @property
    def trace_id(self) -> str | None:
        """§15.3: the trace of the request that created the job; None when not traced."""
        return self._text("traceId")

    @property
    def truncated(self) -> tuple[str, ...]:
        value = self._data.get("truncated")
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    def _text(self, key: str) -> str | None:
        value = self._data.get(key)
        return value if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, status={self.status!r}, created_at={self.created_at!r})"


class Submission(ApiObject):
    """The answer of ``POST /v1/fetcher`` (§2.8): a new job (202) or the duplicate of an
    identical request (200, ``duplicate``), with the ``Location`` header when sent."""

    __slots__ = ("_duplicate", "_location")
    _kind = "job submission answer"
    _required = ("jobId", "status", "createdAt", "message")

    def __init__(
        self, data: Mapping[str, Any], *, duplicate: bool, location: str | None = None
    ) -> None:
        super().__init__(data)
        self._duplicate = duplicate
        self._location = location

    @property
    def job_id(self) -> str:
        return str(self._data["jobId"])

    @property
    def status(self) -> str:
        return str(self._data["status"])

    @property
    def created_at(self) -> str:
        return str(self._data["createdAt"])

    @property
    def message(self) -> str:
        return str(self._data["message"])

    @property
    def duplicate(self) -> bool:
        """True when the Manager answered 200: the identical request's existing job."""
        return self._duplicate

    @property
    def location(self) -> str | None:
        return self._location

    def __repr__(self) -> str:
        return (
            f"Submission(job_id={self.job_id!r}, status={self.status!r}, "
            f"duplicate={self.duplicate!r})"
        )
