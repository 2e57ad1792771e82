"""Metrics summed over the gunicorn workers, and one JSON log line per admission."""

from __future__ import annotations

import copy
import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.server.harness import Server, envelope, make_request
from webhook.http.metrics import FLUSH_SECONDS

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "obs", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}


def samples(server: Server) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A scrape once every worker has flushed what it counted so far (webhook/http/metrics.py)."""
    time.sleep(FLUSH_SECONDS * 2 + 0.1)
    reply = server.plain("GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(reply.body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


REQUESTS = "gpupolicy_admission_requests_total"


@pytest.mark.parametrize(("webhook", "count"), [("validate", 24), ("mutate", 13)])
def test_request_counter_is_exact_across_workers(server: Server, webhook: str, count: int) -> None:
    labels = {"webhook": webhook, "operation": "DELETE", "decision": "allowed"}
    before = value(samples(server), REQUESTS, **labels)
    for i in range(count):
        # A new connection per request, so both workers take some.
        conn = server.connection()
        req = make_request(None, operation="DELETE", old=POD, uid=f"obs-{webhook}-{i}")
        conn.request("POST", f"/{webhook}", body=json.dumps(envelope(req)))
        assert conn.getresponse().status == 200
        conn.close()
    after = samples(server)
    assert value(after, REQUESTS, **labels) - before == count
    assert value(after, "gpupolicy_admission_request_duration_seconds_count", webhook=webhook) >= count
    time.sleep(0.2)  # log lines are flushed per line, but let both workers finish writing
    lines = [e for e in server.logs() if str(e.get("uid", "")).startswith(f"obs-{webhook}-")]
    assert len(lines) == count
    for line in lines:
        assert line["msg"] == "admission" and line["webhook"] == webhook
        assert line["decision"] == "allowed" and line["operation"] == "DELETE"
        assert line["kind"] == "Pod" and line["namespace"] == "default" and line["name"] == "obs"
        assert isinstance(line["rules"], list) and line["latency_ms"] >= 0


def test_metric_families(server: Server) -> None:
    server.post("/validate", envelope(make_request(copy.deepcopy(POD), uid="obs-fam")))
    found = samples(server)
    names = {name for name, _ in found}
    buckets = {dict(labels).get("le") for name, labels in found
               if name == "gpupolicy_admission_request_duration_seconds_bucket"}
    assert {"0.001", "0.01", "0.1", "1.0", "10.0", "+Inf"} <= buckets
    assert value(found, "gpupolicy_policies_loaded") == 3  # tests/server/policies
    assert value(found, "gpupolicy_policy_reloads_total", source="policies", result="success") >= 2
    assert "gpupolicy_source_error" in names


def test_bad_request_counted(server: Server) -> None:
    labels = {"webhook": "validate", "operation": "", "decision": "bad_request"}
    before = value(samples(server), REQUESTS, **labels)
    server.request("POST", "/validate", b"nope")
    assert value(samples(server), REQUESTS, **labels) - before == 1


def test_readyz_and_healthz(server: Server) -> None:
    assert server.request("GET", "/healthz").json == {"ok": True}
    ready = server.request("GET", "/readyz")
    assert ready.status == 200
    detail = ready.json
    assert detail["ready"] is True and detail["errors"] == {}
    assert sorted(detail["policies"]) == ["labs-warn", "sandbox-audit", "teams-enforce"]
    assert set(detail["loaded"]) == {"policies", "namespaces"}
