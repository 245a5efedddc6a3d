"""The README and ``docs/`` against the code, so the documentation cannot drift (issue 20):
every relative link and anchor resolves; every repository file and ``fetcher.*`` module a page
names exists; ``docs/settings.md`` names exactly the variables ``settings/environment.py``
reads, and every other ``UPPER_CASE`` name a page mentions exists in the code; every
``fetcher`` command and flag a page shows exists; every HTTP path a page shows is a route of
the Manager; and the typed-client example is the code an end-to-end test runs."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "fetcher"
#: The project's own specification and the customer's pages it agrees with: cited, linked and
#: checked for links, but not held to the code-drift checks (they quote upstream's names too).
CONTRACT = ROOT / "docs" / "contract.md"
SPEC_DOCS = (CONTRACT, *sorted((ROOT / "docs" / "customer").glob("*.md")))
USER_DOCS = (
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p not in SPEC_DOCS),
)
ALL_DOCS = (
    *USER_DOCS,
    *SPEC_DOCS,
    ROOT / "bench" / "README.md",
    ROOT / "tests" / "contract" / "README.md",
)

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\1[ \t]*$", re.M | re.S)
_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text outside fenced blocks and code spans (where a ``[x](y)`` is a link)."""
    return _SPAN.sub("", _FENCE.sub("", text))


def _code(text: str) -> Iterator[str]:
    """Every fenced block's and code span's content (where commands and paths are shown)."""
    for block in _FENCE.finditer(text):
        yield block.group(0)
    for span in _SPAN.finditer(_FENCE.sub("", text)):
        yield span.group(2)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text())):
        slug = _slug(heading)
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(anchors)


def test_the_pages_are_found() -> None:
    assert {"README.md", "docs/settings.md", "docs/architecture.md"} <= {
        _name(p) for p in USER_DOCS
    }


@pytest.mark.parametrize("page", ALL_DOCS, ids=_name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # https://, mailto: — nothing on this machine to check
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


# Paths from the root, or from src/fetcher as docs/architecture.md writes them, and modules.
_REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:tests|bench|src|scripts|examples|docs|services|manager|adapters|engine"
    r"|worker|cli|crypto|client|consumer)/[\w./-]*\w)"
)
_MODULE = re.compile(r"(?<![\w.])fetcher((?:\.\w+)+)(?![\w{])")


def _exists(relative: str) -> bool:
    bases = (ROOT, SRC)
    return any((b / relative).exists() or (b / f"{relative}.py").exists() for b in bases)


def _module_source(parts: list[str]) -> str | None:
    for candidate in (SRC.joinpath(*parts).with_suffix(".py"), SRC.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate.read_text()
    return None


def _module_or_attribute(dotted: str) -> bool:
    """``.adapters.jsonlayout.fastjson`` is a module; ``.client.FetcherClient`` a name its parent
    defines. A first part that is no subpackage (``fetcher.jwt``, a ce-id) is not a module."""
    parts = dotted.strip(".").split(".")
    if not (SRC / parts[0]).is_dir() and not (SRC / f"{parts[0]}.py").is_file():
        return True
    if _module_source(parts) is not None:
        return True
    parent = _module_source(parts[:-1])
    if parent is None:
        return False
    # A name the parent defines, or re-exports (``fetcher.client`` star-imports its errors).
    module = importlib.import_module(".".join(["fetcher", *parts[:-1]]))
    return hasattr(module, parts[-1])


@pytest.mark.parametrize("page", USER_DOCS, ids=_name)
def test_every_file_and_module_a_page_names_exists(page: Path) -> None:
    missing = []
    for code in _code(page.read_text()):
        for path in _REPO_PATH.findall(code):
            if "*" not in path and not _exists(path.rstrip(".")):
                missing.append(path)
        missing += [f"fetcher{d}" for d in _MODULE.findall(code) if not _module_or_attribute(d)]
    assert missing == []


# --- settings ------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_(?:[A-Z0-9]+|<NAME>))+(?:_\*)?")


def _string_args(path: Path, methods: frozenset[str]) -> set[str]:
    """The constant first arguments of ``x.<method>("NAME", …)`` calls and ``x["NAME"]``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            first, method = node.args[0], node.func.attr
            if method in methods and isinstance(first, ast.Constant):
                found.add(str(first.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            found.add(str(node.slice.value))
    return {name for name in found if _ENV_NAME.fullmatch(name)}


@cache
def _settings_variables() -> frozenset[str]:
    """What ``Settings.from_env`` reads: settings/environment.py's reads and §9.4's family."""
    reads = _string_args(
        SRC / "settings" / "environment.py", frozenset({"get", "integer", "boolean"})
    )
    return frozenset(reads | {"DATASOURCE_<NAME>_*"})


@cache
def _cli_variables() -> frozenset[str]:
    return frozenset(
        name
        for path in (SRC / "cli").glob("*.py")
        for name in _string_args(path, frozenset({"get"}))
    )


def _settings_table_names() -> set[str]:
    """The variables of the tables under "Every variable" in docs/settings.md (not the
    command line's own)."""
    text = (ROOT / "docs" / "settings.md").read_text()
    section = text.split("## Every variable", 1)[1].split("### The command line's own", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in rows for name in re.findall(r"`([^`]+)`", cell)}


def test_the_settings_page_names_every_variable_settings_reads_and_no_other() -> None:
    documented = _settings_table_names()
    assert len(_settings_variables()) > 40
    assert sorted(_settings_variables() - documented) == [], "read but not documented"
    assert sorted(documented - _settings_variables()) == [], "documented but never read"


@cache
def _names_in_code() -> frozenset[str]:
    """Every UPPER_CASE identifier or string in the Python of the tree, and in the Makefile
    and CI script (constants, enum members, test and bench variables)."""
    found: set[str] = set()
    for folder in ("src", "tests", "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Name):
                    found.add(node.id)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.update(_ENV_NAME.findall(node.value))
    for path in (ROOT / "Makefile", ROOT / ".ci" / "run"):
        found.update(_ENV_NAME.findall(path.read_text()))
    return frozenset(found)


#: Names of other software a page may mention: the OpenTelemetry SDK reads ``OTEL_BSP_*``
#: itself (docs/tracing.md).
_THIRD_PARTY_PREFIXES = ("OTEL_BSP_",)
#: Routes of other servers a page may show: an OTLP/HTTP collector's (docs/tracing.md).
_THIRD_PARTY_PATHS = frozenset({"/v1/traces"})


def _known(name: str) -> bool:
    if name in _settings_variables() | _cli_variables() | _names_in_code():
        return True
    if name.startswith(_THIRD_PARTY_PREFIXES):
        return True
    if name.endswith("_*"):  # a family such as RABBITMQ_* or OBJECT_STORAGE_*
        return any(v.startswith(name[:-1]) for v in _settings_variables())
    return name.startswith("DATASOURCE_<NAME>_")


@pytest.mark.parametrize("page", USER_DOCS, ids=_name)
def test_every_upper_case_name_a_page_mentions_exists_in_the_code(page: Path) -> None:
    unknown = sorted({n for n in _ENV_NAME.findall(page.read_text()) if not _known(n)})
    assert unknown == []


# --- the command line ----------------------------------------------------------------------

_COMMAND = re.compile(r"(?:^|[\s$(`])fetcher\s+([a-z][a-z-]*(?:\s+[a-z]+)?)([^\n;&)>`]*)", re.M)


def _help_text(argv: list[str]) -> str:
    """What ``fetcher <argv>`` prints, from a child process: some commands bind
    ``sys.stdout`` as a default argument when imported, out of reach of a redirect here."""
    done = subprocess.run(  # noqa: S603 - our own interpreter and command, fixed arguments
        [sys.executable, "-c", "import sys; from fetcher.cli import main; sys.exit(main())", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout + done.stderr


@cache
def _commands() -> dict[str, frozenset[str]]:
    """``{"events tail": {"--json", …}, …}`` from ``fetcher --help`` and each ``--help``."""
    usage = _help_text(["--help"]).split("commands:", 1)[1]
    commands: dict[str, frozenset[str]] = {}
    for line in filter(None, (line.strip() for line in usage.splitlines())):
        head = re.split(r"\s{2,}", line)[0]
        name = " ".join(w for w in head.split() if w[0] not in "[<")
        text = _help_text([*name.split(), "--help"])
        commands[name] = frozenset(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", text))
    return commands


def _invocations(page: Path) -> Iterator[tuple[str, str]]:
    for code in _code(page.read_text()):
        plain = re.sub(r"<[^<>\n]*>", "X", code.replace("\\|", " "))  # <jobId|objectKey>
        for match in _COMMAND.finditer(plain):
            words = match.group(1).split()
            command = " ".join(words) if " ".join(words) in _commands() else words[0]
            rest = (" ".join(words[1:]) + " " if command == words[0] else "") + match.group(2)
            # The command ends at a shell pipe or list operator: `| cut -c1-120` is cut's.
            yield command, re.split(r"\s(?:\||&&|;)\s", rest)[0]


#: docs/command-line.md shows what an unknown command answers.
_DELIBERATELY_UNKNOWN = frozenset({"bogus"})


def _group_help(command: str, rest: str) -> bool:
    """``fetcher jobs --help``: a command group's name with only ``--help`` prints its help."""
    groups = {name.split()[0] for name in _commands() if " " in name}
    return command in groups and rest.split() in (["--help"], ["-h"])


@pytest.mark.parametrize("page", ALL_DOCS, ids=_name)
def test_every_command_and_flag_a_page_shows_exists(page: Path) -> None:
    wrong = []
    for command, rest in _invocations(page):
        if command in _DELIBERATELY_UNKNOWN or _group_help(command, rest):
            continue
        if command not in _commands():
            wrong.append(f"fetcher {command}: no such command")
            continue
        for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", rest):
            if flag not in _commands()[command]:
                wrong.append(f"fetcher {command} {flag}: no such option")
    assert len(_commands()) >= 7
    assert wrong == []


# --- routes --------------------------------------------------------------------------------

_PATH = re.compile(r"(/v1/[\w{}<>$.:/-]*|/readyz/tenant/[\w{}<>$-]+)")
_APP_ROUTES = ("/openapi.json", "/docs")  # added by manager/app.py itself (checked below)


@cache
def _route_patterns() -> tuple[re.Pattern[str], ...]:
    from fetcher.manager.routes import connections, events, jobs, operational

    app = (SRC / "manager" / "app.py").read_text()
    assert all(f'"{path}"' in app for path in _APP_ROUTES)
    paths = [
        str(getattr(route, "path", ""))
        for module in (connections, events, jobs, operational)
        for route in module.router.routes
    ]
    return tuple(
        re.compile(re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(path)) + "/?")
        for path in [*paths, *_APP_ROUTES]
    )


@pytest.mark.parametrize("page", USER_DOCS, ids=_name)
def test_every_api_path_a_page_shows_is_a_route(page: Path) -> None:
    unknown = []
    for code in _code(page.read_text()):
        for shown in _PATH.findall(code):
            path = shown.split("?")[0].rstrip(".:")
            if path in _THIRD_PARTY_PATHS:
                continue
            if not any(p.fullmatch(path) for p in _route_patterns()):
                unknown.append(path)
    assert len(_route_patterns()) > 15
    assert unknown == []


def test_the_client_pages_python_blocks_are_the_ones_a_test_runs() -> None:
    """docs/events.md and docs/jobs.md: tests/e2e/test_doc_snippets.py extracts and runs
    every Python block of both pages, so it must unpack exactly the blocks they hold."""
    runner = (ROOT / "tests" / "e2e" / "test_doc_snippets.py").read_text()
    counts = {
        page: (ROOT / "docs" / page).read_text().count("```python\n")
        for page in ("events.md", "jobs.md")
    }
    assert counts == {"events.md": 4, "jobs.md": 3}
    assert 'consumer, sync_job, async_job, _auth = blocks("events.md")' in runner
    assert 'listing, failed, retry = blocks("jobs.md")' in runner


# --- the specification is the repository's own ---------------------------------------------

#: Every text a reader of the repository meets: pages, code, tests, benchmarks, build files.
_READER_TEXT_GLOBS = (
    "*.md",
    "docs/**/*",
    "src/**/*",
    "tests/**/*",
    "bench/**/*",
    "examples/**/*",
    "deploy/**/*",
    "scripts/**/*",
    "Makefile",
    "pyproject.toml",
    "Containerfile",
    "setup.py",
)
_BINARY_SUFFIXES = frozenset({".so", ".pyc", ".png", ".gz", ".db"})
#: A section sign cites the contract, unless another standard is named just before it
#: ("RFC 9562 §5.7").
_SECTION = re.compile(r"(?<!RFC \d{4} )(?<!RFC \d{3} )§ ?(\d+(?:\.\d+)*)")
_CONTRACT_HEADING = re.compile(r"^#{2,6} (\d+(?:\.\d+)*)\.? ", re.M)


def _reader_texts() -> Iterator[Path]:
    seen: set[Path] = set()
    for pattern in _READER_TEXT_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if (
                path.is_file()
                and path not in seen
                and path.suffix not in _BINARY_SUFFIXES
                and not any(part.endswith(".egg-info") for part in path.parts)
            ):
                seen.add(path)
                yield path


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def test_no_reference_leaves_the_repository() -> None:
    """The specification lives in docs/contract.md: nothing sends a reader to a folder beside
    the clone (the steering repository's spec), which a person who clones the project lacks."""
    outside = re.compile("|".join(("\\.\\./" + "shared", "shared/" + "spec", "CONTRACT" + "\\.md")))
    assert outside.search("see ../sha" + "red/spec/CON" + "TRACT.md §4.5")  # the pattern bites
    leaving = [
        f"{_name(path)}:{n}"
        for path in _reader_texts()
        for n, line in enumerate(_text(path).splitlines(), 1)
        if outside.search(line)
    ]
    assert leaving == []


def test_every_cited_section_is_a_heading_of_the_contract() -> None:
    sections = set(_CONTRACT_HEADING.findall(CONTRACT.read_text()))
    assert {"1", "2.3", "4.5", "12.6"} <= sections  # the pattern reads the headings
    dangling = sorted(
        f"{_name(path)}: §{number}"
        for path in _reader_texts()
        for number in set(_SECTION.findall(_text(path)))
        if number not in sections
    )
    assert dangling == []
