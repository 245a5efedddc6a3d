"""deploy/prometheus/alerts.yaml and deploy/grafana/fetcher.json against the metrics catalogue
(docs/metrics.md, §15.2): the rules pass ``promtool check rules`` and their unit tests
(``promtool test rules``, Debian's ``prometheus`` package, installed by
scripts/system-packages.sh), and every alert and dashboard query names only catalogued
metrics."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.metrics_catalogue import ALERT_TESTS, ALERTS, DASHBOARD, catalogue, query_metrics

EXPECTED_ALERTS = {
    "FetcherJobFailureRatioHigh",
    "FetcherPendingJobsStuck",
    "FetcherOutboxBacklog",
    "FetcherNoWorkerConsuming",
    "FetcherReadinessDown",
}


def _promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: run scripts/system-packages.sh (Debian package prometheus)"
    return path


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    """``promtool check rules`` then ``promtool test rules``: each alert fires on the series
    that should page and stays quiet on the others (alerts.test.yaml)."""
    for command in ("check", "test"):
        target = ALERTS if command == "check" else ALERT_TESTS
        done = subprocess.run(  # noqa: S603 (a fixed tool on repository files)
            [_promtool(), command, "rules", str(target)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout


def test_the_rule_set_is_the_documented_one_and_every_alert_is_unit_tested() -> None:
    rules = _rules()
    assert {rule["alert"] for rule in rules} == EXPECTED_ALERTS
    tested = {
        case["alertname"]
        for test in yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))["tests"]
        for case in test.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    assert tested == EXPECTED_ALERTS


def test_every_alert_expression_names_only_catalogued_metrics() -> None:
    known = catalogue()
    for rule in _rules():
        named = query_metrics(rule["expr"])
        assert named, rule["alert"]
        assert named <= known.keys(), (rule["alert"], named - known.keys())


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    queries += [
        (variable["name"], variable["query"])
        for variable in dashboard["templating"]["list"]
        if variable["type"] == "query"
    ]
    return queries


def test_every_dashboard_query_names_only_catalogued_metrics() -> None:
    known = catalogue()
    queries = _dashboard_queries()
    assert len(queries) >= 20
    for title, expr in queries:
        named = query_metrics(expr)
        assert named, (title, expr)
        assert named <= known.keys(), (title, named - known.keys())


@pytest.mark.parametrize(
    ("expr", "unknown"),
    [
        ("rate(fetcher_jobs_failed_total[5m])", "fetcher_jobs_failed_total"),
        ("histogram_quantile(0.9, rate(fetcher_job_wait_seconds_bucket[5m]))", None),
        ("fetcher_outbox_pending_bucket", "fetcher_outbox_pending_bucket"),
    ],
)
def test_the_query_check_catches_an_uncatalogued_name(expr: str, unknown: str | None) -> None:
    """The check above can fail: a name not in the catalogue (or a histogram suffix on a
    gauge) is reported as written."""
    extra = query_metrics(expr) - catalogue().keys()
    assert extra == ({unknown} if unknown else set())
