"""docs/metrics.md read as data: the catalogue of metric families (§15.2), and the families a
``/metrics`` exposition holds, compared by the deploy and e2e tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "docs" / "metrics.md"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "fetcher.json"

_ROW = re.compile(
    r"^\| `(?P<name>[a-z_:]+)` \| (?P<type>counter|gauge|histogram) \| (?P<labels>[^|]*) \|"
)
#: A PromQL identifier that is one of ours (label names and functions never start so).
_METRIC_TOKEN = re.compile(r"\b(?:fetcher|process)_[a-z_]+\b")
_HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    labels: frozenset[str]


def catalogue() -> dict[str, Family]:
    """Every row of the catalogue table, by metric name."""
    families: dict[str, Family] = {}
    for line in CATALOGUE.read_text(encoding="utf-8").splitlines():
        if match := _ROW.match(line):
            labels = frozenset(re.findall(r"`([a-z_]+)`", match["labels"]))
            families[match["name"]] = Family(match["name"], match["type"], labels)
    return families


def exposed(text: str) -> dict[str, Family]:
    """The families of an exposition, named as its ``# TYPE`` lines name them, without the
    ``_created`` gauges prometheus_client adds to counters and histograms (the catalogue says
    so once). Labels are those of the samples present (``le`` dropped)."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    labels: dict[str, set[str]] = {name: set() for name in types}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            owner = _owner(sample.name, types)
            if owner is not None:
                labels[owner].update(k for k in sample.labels if k != "le")
    created = {
        name
        for name, kind in types.items()
        if kind == "gauge"
        and name.endswith("_created")
        and (
            types.get(name.removesuffix("_created") + "_total") == "counter"
            or types.get(name.removesuffix("_created")) == "histogram"
        )
    }
    return {
        name: Family(name, kind, frozenset(labels[name]))
        for name, kind in types.items()
        if name not in created
    }


def _owner(sample: str, types: dict[str, str]) -> str | None:
    if sample in types:
        return sample
    for suffix in _HISTOGRAM_SERIES:
        if sample.endswith(suffix) and types.get(sample.removesuffix(suffix)) == "histogram":
            return sample.removesuffix(suffix)
    return None


def query_metrics(expr: str) -> set[str]:
    """The catalogue families a PromQL expression names (a histogram's ``_bucket``, ``_sum``
    and ``_count`` series name their family); an unknown name is returned as written."""
    known = catalogue()
    named: set[str] = set()
    for token in _METRIC_TOKEN.findall(expr):
        family = token
        for suffix in _HISTOGRAM_SERIES:
            stem = token.removesuffix(suffix)
            if (
                token.endswith(suffix)
                and known.get(stem, Family("", "", frozenset())).type == "histogram"
            ):
                family = stem
        named.add(family)
    return named
