"""``GET /v1/fetcher`` in ``/openapi.json``: its parameters (``limit`` fitted to
``MAX_PAGINATION_LIMIT``) and its page schema; ``POST /v1/fetcher`` on the same path keeps its
document (FastAPI keeps a path item with parameters as a plain dict, which would reorder it)."""

from __future__ import annotations

import re

from tests.unit.manager.conftest import HarnessFactory


async def test_the_list_is_documented_with_the_configured_limit(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(env={"MAX_PAGINATION_LIMIT": "50"})
    document = (await h.client.get("/openapi.json")).json()
    operation = document["paths"]["/v1/fetcher"]["get"]
    params = {p["name"]: p for p in operation["parameters"]}
    assert list(params) == [
        "X-Product-Name",
        "status",
        "connectionId",
        "createdFrom",
        "createdTo",
        "limit",
        "cursor",
    ]
    limit = params["limit"]["schema"]["pattern"]
    assert re.fullmatch(limit, "50")
    assert not re.fullmatch(limit, "51")
    status = params["status"]["schema"]["pattern"]
    assert re.fullmatch(status, "failed,pending")
    assert not re.fullmatch(status, "failed, pending")
    page = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert page == {"$ref": "#/components/schemas/JobPage"}
    assert set(document["components"]["schemas"]["JobListItem"]["properties"]) >= {"truncated"}
    create = document["paths"]["/v1/fetcher"]["post"]["requestBody"]
    assert list(create) == ["content", "required"]
