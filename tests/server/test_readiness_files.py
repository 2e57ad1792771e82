"""How /readyz combines the workers' readiness files (webhook/http/metrics_port.py): the least
ready worker decides, a worker just forked counts as not ready until it reports, a stopping one
no longer counts, and each worker not ready says why."""

from __future__ import annotations

import pytest

from webhook.http import metrics_port, shared

READY = {"ready": True, "waiting_for": [], "errors": {}}
WAITING = {"ready": False, "waiting_for": ["namespaces", "inventory"],
           "errors": {"namespaces": "403 Forbidden", "gpupolicy/x": "invalid"}}


@pytest.fixture(autouse=True)
def shared_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(shared.MULTIPROC_ENV, str(tmp_path))
    metrics_port._published.clear()
    yield
    metrics_port._published.clear()


@pytest.mark.parametrize(("files", "expected", "ready", "why"), [
    ({1: READY, 2: READY}, 2, True, {}),
    ({1: READY}, 2, False, {"workers": "1 of 2 workers running"}),
    ({1: READY, 2: "starting"}, 2, False, {"2": "starting: not yet reported"}),
    ({1: READY, 2: WAITING}, 2, False,
     {"2": "waiting for namespaces, inventory (namespaces: 403 Forbidden)"}),
    # SIGHUP: two old workers still ready, two new ones not yet: not ready
    ({1: READY, 2: READY, 3: "starting", 4: WAITING}, 2, False,
     {"3": "starting: not yet reported",
      "4": "waiting for namespaces, inventory (namespaces: 403 Forbidden)"}),
    # the old ones stopping no longer count; the new ones ready: ready
    ({1: {**READY, "stopping": True}, 3: READY, 4: READY}, 2, True, {}),
    ({1: {**READY, "stopping": True}, 3: READY}, 2, False,
     {"workers": "1 of 2 workers running"}),
])
def test_readyz_follows_the_least_ready_worker(files, expected, ready, why):
    for pid, detail in files.items():
        if detail == "starting":
            metrics_port.expect_worker(pid)
        else:
            metrics_port.publish(pid, detail)
    got, detail = metrics_port.readiness(expected)
    assert got is ready
    assert detail["not_ready"] == why
    assert set(detail["workers"]) == {str(pid) for pid in files}


def test_the_master_never_writes_over_what_a_worker_published():
    metrics_port.publish(7, READY)
    metrics_port.expect_worker(7)
    assert metrics_port.readiness(1)[0] is True
    metrics_port.unpublish(7)
    assert metrics_port.readiness(1)[0] is False
