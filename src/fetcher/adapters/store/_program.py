"""Units of store work as data, so that one body of logic runs on a sync and an async driver.

A :data:`Program` is a generator that yields the steps of one unit of work (a
:class:`Statement`, an :class:`Each` or a :class:`Script`) and receives each step's
:class:`Result`; what it returns is the unit's result. It does no I/O itself: the SQLite
store drives it on its worker thread with ``sqlite3`` (sync), the PostgreSQL store on one
pooled connection with psycopg (async), both inside the transaction named by a :data:`Tx`.
So a compare-and-set followed by its outbox row, or the migration loop, is written once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast

__all__ = [
    "Row",
    "Statement",
    "Each",
    "Script",
    "Step",
    "Result",
    "Program",
    "Tx",
    "drive",
    "drive_async",
    "single",
    "run_all",
]

T = TypeVar("T")
Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement in the shared ``:name`` spelling, with its parameters."""

    sql: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Each:
    """One statement run once for each parameter mapping (``executemany``)."""

    sql: str
    rows: Sequence[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Script:
    """A migration script, run verbatim: no parameters, possibly several statements."""

    sql: str


Step: TypeAlias = Statement | Each | Script


@dataclass(frozen=True, slots=True)
class Result:
    """What one step did: the rows it returned (none for a write) and its row count."""

    rows: list[Row]
    rowcount: int


Program: TypeAlias = Generator[Step, Result, T]

#: The transaction a program runs in. ``autocommit``: none (one statement, or statements that
#: may commit one by one); ``write``: all or nothing, writers serialized where the backend
#: must (SQLite ``BEGIN IMMEDIATE``); ``snapshot``: reads that see one state of the database;
#: ``exclusive``: one at a time across processes (migrations).
Tx = Literal["autocommit", "write", "snapshot", "exclusive"]


@dataclass(frozen=True, slots=True)
class _Done(Generic[T]):
    """A finished program's result."""

    value: T


def _advance(program: Program[T], result: Result | None) -> Step | _Done[T]:
    """The program's next step, given the last step's result (``None`` to start it)."""
    try:
        return next(program) if result is None else program.send(result)
    except StopIteration as finished:
        return _Done(cast(T, finished.value))


def drive(program: Program[T], execute: Callable[[Step], Result]) -> T:
    """Run ``program`` to its end with a sync driver's ``execute``; its result."""
    step = _advance(program, None)
    while not isinstance(step, _Done):
        step = _advance(program, execute(step))
    return step.value


async def drive_async(program: Program[T], execute: Callable[[Step], Awaitable[Result]]) -> T:
    """Run ``program`` to its end with an async driver's ``execute``; its result."""
    step = _advance(program, None)
    while not isinstance(step, _Done):
        step = _advance(program, await execute(step))
    return step.value


def single(step: Step) -> Program[Result]:
    """The program of one step."""
    return (yield step)


def run_all(steps: Sequence[Step]) -> Program[list[Result]]:
    """The program of ``steps`` in order; their results."""
    results: list[Result] = []
    for step in steps:
        results.append((yield step))
    return results
