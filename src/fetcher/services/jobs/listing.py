"""List and search jobs (``GET /v1/fetcher``, issue 21).

A page of the caller's tenant's jobs (§12.5), newest first, filtered by status, connection,
creation window and product; a product-restricted token sees only its products' jobs (§12.4),
and ``X-Product-Name`` narrows to one product (the route has already checked it is allowed).

Items are the ``GET /v1/fetcher/{id}`` shape (§4.6), except that a ``mappedFields``,
``filters`` or ``metadata`` document whose stored JSON text is over :data:`MAX_LISTED_DOCUMENT`
bytes (UTF-8) is cut, and ``truncated`` names the members cut (the full job is one
``GET /v1/fetcher/{id}`` away): ``mappedFields`` and ``filters`` are left out, ``metadata``
keeps only ``source``, as the job's product (trimmed and lower-cased, §3.7), and ``error`` on a
failed job (at most 2,000 code points by §4.5). A cut
JSON text would not parse, so the list never cuts inside a document. The store cuts in the
database (:class:`~fetcher.services.store_roles.ListedJob`), so a page of 100 jobs is at most a few
hundred KiB in the process whatever the jobs hold; a page is encoded off the event loop (the
route). ``nextCursor`` is ``null`` on the last page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from fetcher.services.api.response_models import JobResponse
from fetcher.services.connections.directory import ConnectionDirectory
from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.jobs.cursor import CursorCodec
from fetcher.services.jobs.list_query import JobListRequest
from fetcher.services.jobs.service import job_response
from fetcher.services.principal import Principal
from fetcher.services.store_roles import JobSearch, JobSearchQuery, ListedJob

__all__ = ["MAX_LISTED_DOCUMENT", "JobListItem", "JobListService", "JobPage", "job_list_item"]

#: A listed job's ``mappedFields``/``filters``/``metadata`` text over this many bytes is cut.
MAX_LISTED_DOCUMENT = 4096


def job_list_item(listed: ListedJob) -> dict[str, object]:
    """The §4.6 JobResponse of a listed job, its cut documents left out and named."""
    item = job_response(listed.job)
    for member in listed.cut:
        if member != "metadata":  # the cut metadata still holds source (and error)
            item.pop(member, None)
    if listed.cut:
        item["truncated"] = list(listed.cut)
    return item


@dataclass
class JobListService:
    search: JobSearch
    directory: ConnectionDirectory
    cursors: CursorCodec = field(repr=False)

    async def list_page(
        self, request: JobListRequest, *, product: str | None, principal: Principal
    ) -> dict[str, object]:
        """``{"items": [...], "nextCursor": str | None}``. ``product`` is the validated
        ``X-Product-Name`` (``None`` when absent)."""
        tenant = principal.tenant
        after = None
        if request.cursor is not None:
            after = self.cursors.decode(
                request.cursor, tenant=tenant, request=request, product=product
            )
        rows = await self.search.search_jobs(self._query(request, product, principal, after))
        page = rows[: request.limit]
        next_cursor = None
        if len(rows) > request.limit:
            position = (page[-1].job.created_at, page[-1].job.id)
            next_cursor = self.cursors.encode(
                position, tenant=tenant, request=request, product=product
            )
        return {"items": [job_list_item(job) for job in page], "nextCursor": next_cursor}

    def _query(
        self,
        request: JobListRequest,
        product: str | None,
        principal: Principal,
        after: tuple[datetime, str] | None,
    ) -> JobSearchQuery:
        products = principal.products
        if product is not None:
            products = frozenset({product})
        connection_id, datasource = request.connection_id, None
        if connection_id is not None:
            datasource = self._internal_name(connection_id, principal.tenant)
            connection_id = None if datasource is not None else connection_id
        return JobSearchQuery(
            tenant=principal.tenant,
            limit=request.limit + 1,  # one more tells whether a next page exists
            statuses=request.statuses,
            products=products,
            connection_id=connection_id,
            datasource=datasource,
            created_from=request.created_from,
            created_before=request.created_before,
            after=after,
            max_document_bytes=MAX_LISTED_DOCUMENT,
        )

    def _internal_name(self, connection_id: str, tenant: str) -> str | None:
        """The internal datasource (§9.4) the tenant sees under ``connection_id``, if any."""
        for name, descriptor in self.directory.internal_for(tenant).items():
            if (descriptor.connection_id or internal_connection_id(name)) == connection_id:
                return name
        return None


# --- the response, as /openapi.json publishes it ------------------------------------------


class JobListItem(JobResponse):
    """A §4.6 JobResponse in a list: ``mappedFields``/``filters`` may be left out and
    ``metadata`` cut to ``source`` (and ``error``); ``truncated`` then names them."""

    mappedFields: dict[str, dict[str, list[str]]] | None = None  # type: ignore[assignment]
    truncated: list[Literal["mappedFields", "filters", "metadata"]] | None = None


class JobPage(BaseModel):
    """One page, newest first; ``nextCursor`` is ``null`` on the last page."""

    model_config = ConfigDict(extra="forbid")

    items: list[JobListItem]
    nextCursor: str | None
