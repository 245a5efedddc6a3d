"""The ``mappedFields`` tree ``{datasource: {table: [field, …]}}`` (contract §2.6.9, §3.2, §3.5).

One walker, :func:`first_mapped_fields_problem`, runs one :class:`MappedFieldsChecks` (a pass)
over the tree in request order; each route states its checks and messages as passes (the job in
:mod:`fetcher.services.jobs.validation`, validate-schema in
:mod:`fetcher.services.connections.schema_requests`). The count rules and their messages are here,
one
:class:`CountMessages` table per route: the Manager counts with them, and the planner re-counts
a job against the Worker's effective limits (§3.5) with :data:`JOB_COUNTS`, so the two can never
word a count differently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "JOB_COUNTS",
    "VALIDATION_COUNTS",
    "CountMessages",
    "MappedFieldsChecks",
    "first_mapped_fields_problem",
]

#: A check returns the message of the problem it finds, else ``None``.
Problem = str | None


def _no_problem(*_: object) -> Problem:
    return None


@dataclass(frozen=True, slots=True)
class MappedFieldsChecks:
    """One pass over the tree; :func:`first_mapped_fields_problem` returns the first message a
    check gives.

    Order: ``tree`` on the whole value; then for each datasource ``datasource`` (its name and
    value), each of its tables (``table``, then ``entry`` for each entry, then ``table_done``),
    then ``datasource_done``. The walker descends only into objects (datasources) and lists of
    strings (tables) and skips other values: a pass that must refuse them says so in its
    ``datasource`` or ``table`` check.
    """

    tree: Callable[[object], Problem] = _no_problem
    datasource: Callable[[str, object], Problem] = _no_problem
    table: Callable[[str, str, object], Problem] = _no_problem
    entry: Callable[[str, str, str], Problem] = _no_problem
    table_done: Callable[[str, str, Sequence[str]], Problem] = _no_problem
    datasource_done: Callable[[str, Mapping[str, object]], Problem] = _no_problem


def first_mapped_fields_problem(mapped: object, checks: MappedFieldsChecks) -> Problem:
    """The first problem ``checks`` finds in ``mapped``, walking it in request order."""
    problem = checks.tree(mapped)
    if problem or not isinstance(mapped, Mapping):
        return problem
    for ds, tables in mapped.items():
        problem = checks.datasource(ds, tables) or _tables(ds, tables, checks)
        if problem:
            return problem
    return None


def _tables(ds: str, tables: object, checks: MappedFieldsChecks) -> Problem:
    if not isinstance(tables, Mapping):
        return None
    for table, entries in tables.items():
        problem = checks.table(ds, table, entries) or _entries(ds, table, entries, checks)
        if problem:
            return problem
    return checks.datasource_done(ds, tables)


def _entries(ds: str, table: str, entries: object, checks: MappedFieldsChecks) -> Problem:
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    for entry in entries:
        problem = checks.entry(ds, table, entry)
        if problem:
            return problem
    return checks.table_done(ds, table, entries)


@dataclass(frozen=True, slots=True)
class CountMessages:
    """One route's count rules: ``str.format`` templates over ``maximum``, ``count``, ``ds``
    and ``table``; ``in_turn``: every table count of the tree before any field count
    (§2.6.9's check table), else each datasource's fields right after its tables (§3.5)."""

    datasources: str
    tables: str
    fields: str
    in_turn: bool = False

    def datasources_over(self, maximum: int, count: int) -> Problem:
        return self.datasources.format(maximum=maximum, count=count) if count > maximum else None

    def tables_over(self, maximum: int, count: int, ds: str) -> Problem:
        return self.tables.format(maximum=maximum, count=count, ds=ds) if count > maximum else None

    def fields_over(self, maximum: int, count: int, ds: str, table: str) -> Problem:
        if count <= maximum:
            return None
        return self.fields.format(maximum=maximum, count=count, ds=ds, table=table)

    def first_problem(self, mapped: object, datasources: int, tables: int, fields: int) -> Problem:
        """The first count of the shaped tree ``mapped`` over these maxima, in this route's
        order."""
        for checks in self._passes(datasources, tables, fields):
            problem = first_mapped_fields_problem(mapped, checks)
            if problem:
                return problem
        return None

    def _passes(self, datasources: int, tables: int, fields: int) -> tuple[MappedFieldsChecks, ...]:
        counted = MappedFieldsChecks(
            tree=lambda mapped: self.datasources_over(datasources, len(_sized(mapped))),
            datasource=lambda ds, value: self.tables_over(tables, len(_sized(value)), ds),
        )
        per_table = MappedFieldsChecks(
            table=lambda ds, table, value: self.fields_over(fields, len(_sized(value)), ds, table)
        )
        if self.in_turn:
            return counted, per_table
        return (
            MappedFieldsChecks(
                tree=counted.tree, datasource=counted.datasource, table=per_table.table
            ),
        )


def _sized(value: object) -> Sequence[object] | Mapping[str, object]:
    """A value the shape checks already made an object or an array."""
    if not isinstance(value, Sequence | Mapping):
        raise TypeError("counted before the mappedFields shape was checked")
    return value


#: §3.5: a job's counts against its effective limits, at the Manager (§3.6 step 7) and again in
#: the Worker's planner (§4.5 validation failures).
JOB_COUNTS = CountMessages(
    datasources="Maximum {maximum} datasources allowed per job, got {count}",
    tables="Maximum {maximum} tables allowed per datasource, got {count} for '{ds}'",
    fields="Maximum {maximum} fields allowed per table, got {count} for '{ds}.{table}'",
)
#: §2.6.9: validate-schema's counts (FET-1061), each over the whole tree in turn.
VALIDATION_COUNTS = CountMessages(
    datasources="maximum {maximum} datasources allowed per validation request",
    tables="maximum {maximum} tables allowed per datasource, got {count} for '{ds}'",
    fields="maximum {maximum} fields allowed per table, got {count} for '{ds}.{table}'",
    in_turn=True,
)
