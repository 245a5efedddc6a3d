"""Issue 33 item 5: a span's status and the ``job failed`` line carry the §4.5 category and a
summary with every caller-supplied part replaced; the §4.5 text itself stays on the job."""

from __future__ import annotations

import pytest

from fetcher.engine.errors import truncate_error_text
from fetcher.services.jobs.failure_summary import UNRECOGNISED, summarise_failure

SSN = "SSN-123-45-6789"

CASES = [
    (
        "datasource 'pg_main' is not configured",
        "not_found",
        "datasource 'pg_main' is not configured",
    ),
    ("datasource 'pg_main' is ambiguous", "conflict", "datasource 'pg_main' is ambiguous"),
    (
        "datasource 'pg-2' does not belong to the job's product",
        "forbidden",
        "datasource 'pg-2' does not belong to the job's product",
    ),
    (
        "failed to decrypt credentials for datasource 'pg': unsupported key version: 9",
        "internal",
        "failed to decrypt credentials for datasource 'pg': <detail>",
    ),
    (
        "failed to connect to datasource 'pg': password authentication failed for user \"x\"",
        "connect",
        "failed to connect to datasource 'pg': <detail>",
    ),
    (
        "failed to discover datasource schema 'pg': relation \"a\" does not exist",
        "unavailable",
        "failed to discover datasource schema 'pg': <detail>",
    ),
    (
        "extraction request failed schema validation: invalid filter value for field 'opened_on'"
        f" of table 'accounts' in datasource 'pg': '{SSN}' is not an ISO 8601 date or date-time",
        "validation",
        "extraction request failed schema validation: <issue>",
    ),
    (
        f"extraction request failed schema validation: field 'ref' is a UUID column but received"
        f" non-UUID value '{SSN}'",
        "validation",
        "extraction request failed schema validation: <issue>",
    ),
    (
        "limit override exceeds the configured maximum: limits.maxRows",
        "validation",
        "limit override exceeds the configured maximum: limits.<name>",
    ),
    (
        f"failed to query datasource 'pg': invalid input syntax for type date: \"{SSN}\"",
        "unavailable",
        "failed to query datasource 'pg': <detail>",
    ),
    ("execution exceeded its deadline", "timeout", "execution exceeded its deadline"),
    (
        "extraction result exceeds the configured size limit (1048576 bytes)",
        "limit_exceeded",
        "extraction result exceeds the configured size limit (1048576 bytes)",
    ),
    ("failed to store result: SlowDown", "unavailable", "failed to store result: <detail>"),
    ("failed to record job completion", "internal", "failed to record job completion"),
    (
        "extraction abandoned: worker stopped before completion",
        "internal",
        "extraction abandoned: worker stopped before completion",
    ),
    ("work message was not processed", "internal", "work message was not processed"),
    (
        "work message expired before processing",
        "validation",
        "work message expired before processing",
    ),
    (f"invalid work message: {SSN}", "validation", "invalid work message: <reason>"),
    ("process failed: unable to publish", "unavailable", "process failed: unable to publish"),
    ("internal error", "internal", "internal error"),
]


@pytest.mark.parametrize(("text", "category", "message"), CASES)
def test_every_section_4_5_shape_has_its_category_and_a_value_free_message(
    text: str, category: str, message: str
) -> None:
    summary = summarise_failure(text)
    assert (summary.category, summary.message) == (category, message)
    assert SSN not in summary.message


@pytest.mark.parametrize(
    "name",
    [SSN + "'", "a b", "x" * 101, "", "pg'x"],
)
def test_a_datasource_that_is_not_a_connection_name_is_a_placeholder(name: str) -> None:
    summary = summarise_failure(f"failed to connect to datasource '{name}': refused")
    assert summary.message == "failed to connect to datasource '<ds>': <detail>"
    summary = summarise_failure(f"datasource '{name}' is not configured")
    assert summary.message == "datasource '<ds>' is not configured"


def test_a_cut_text_keeps_its_shape() -> None:
    """§4.5 cuts long texts to 2,000 code points with ``...``: the shape still matches."""
    text = truncate_error_text("failed to query datasource 'pg': " + SSN * 500)
    assert text.endswith("...")
    assert summarise_failure(text).message == "failed to query datasource 'pg': <detail>"


@pytest.mark.parametrize("text", [SSN, f"job failed on '{SSN}'", "internal error: " + SSN])
def test_a_text_of_no_known_shape_is_never_echoed(text: str) -> None:
    summary = summarise_failure(text)
    assert (summary.category, summary.message) == ("internal", UNRECOGNISED)
