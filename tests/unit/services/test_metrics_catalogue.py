"""§15.2 in the unit tier: the families one runtime's registry holds are exactly those of
docs/metrics.md (the e2e test checks the same on the three running modes), and the checker
notices a family missing on either side."""

from __future__ import annotations

from prometheus_client import Gauge, generate_latest

from fetcher.services.metrics import Metrics
from tests.metrics_catalogue import catalogue, exposed


def test_the_registry_is_the_catalogue() -> None:
    families = exposed(generate_latest(Metrics(mode="worker").registry).decode())
    documented = catalogue()
    assert sorted(families.keys() - documented.keys()) == []
    assert sorted(documented.keys() - families.keys()) == []
    for name, family in families.items():
        assert family.type == documented[name].type, name
        assert family.labels <= documented[name].labels, name


def test_an_uncatalogued_family_is_noticed() -> None:
    metrics = Metrics()
    Gauge("fetcher_surprise", "not in the catalogue", registry=metrics.registry)
    families = exposed(generate_latest(metrics.registry).decode())
    assert families.keys() - catalogue().keys() == {"fetcher_surprise"}
    assert "fetcher_build_info" in families  # declared even without a mode (no sample)
    assert families["fetcher_job_wait_seconds"].type == "histogram"
    assert "fetcher_job_wait_seconds_created" not in families
