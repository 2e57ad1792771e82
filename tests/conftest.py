"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Fuzz tests: a few hundred examples in make test (bounded time), many more in make fuzz.
settings.register_profile("default", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """../shared/corpus; tests over it are extra and say so when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not present at {CORPUS} (clone-only checkout): corpus tests not run")
    return CORPUS


@pytest.fixture(autouse=True)
def _no_leaked_metrics_mode() -> Iterator[None]:
    """A test that writes multiprocess metrics (as a gunicorn worker does) switches the process
    to prometheus_client's multiprocess mode; the next tests must not inherit it."""
    from prometheus_client import values

    before = os.environ.get("PROMETHEUS_MULTIPROC_DIR"), values.ValueClass
    yield
    if before[0] is None:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = before[0]
    values.ValueClass = before[1]
