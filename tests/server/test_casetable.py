"""The engine's case table (tests/engine/cases) through a real server: each case as a CREATE
AdmissionReview; the /mutate patch applied and the result sent to /validate, which must allow it
exactly when the case says so; every rule the case names shows up in the /validate answer.

Two servers (with and without the fixture node inventory) serve every case; between groups of
cases their policy directory is switched (an atomic symlink swap) and the test waits until both
workers report the new policy set, which also exercises hot reload."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.engine import review
from policies.rules import NOT_AT_ADMISSION
from tests.engine import casetable
from tests.server import contract, harness
from tests.server.harness import Server, envelope, make_request
from tests.server.test_reload import wait_for
from webhook.http.admission import audit_key
from webhook.inputs.reading import manifest_files
from webhook.inputs.sources import BUNDLED_POLICIES
from webhook.inputs.state import without_quotas

NO_POLICY = ("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\n"
             "metadata: {name: governs-nothing}\nspec: {namespaces: []}\n")
CASES = sorted(casetable.load_cases(), key=lambda c: (c.inventory or "", sorted(c.policies)))


def _raw_policies() -> dict[str, str]:
    """Policy name -> YAML text, as the case files and the bundled defaults define them."""
    texts = {"defaults": "\n---\n".join(p.read_text() for p in manifest_files(BUNDLED_POLICIES))}
    for path in sorted(casetable.CASES.glob("*.yaml")):
        for name, spec in (yaml.safe_load(path.read_text()).get("policies") or {}).items():
            texts[name] = yaml.safe_dump({"apiVersion": "gpupolicy.io/v1alpha1",
                                          "kind": "GPUPolicy", "metadata": {"name": name},
                                          "spec": spec})
    return texts


class CaseServer:
    def __init__(self, server: Server, work: Path) -> None:
        self.server, self.work = server, work
        self.current: tuple[str, ...] | None = None
        self.generation = itertools.count()

    def use(self, names: tuple[str, ...], texts: dict[str, str]) -> None:
        wanted = tuple(sorted(set(names)))
        if wanted == self.current:
            return
        folder = self.work / f"gen-{next(self.generation)}"
        folder.mkdir()
        for name in wanted:
            (folder / f"{name}.yaml").write_text(texts[name])
        if not wanted:  # "no policy": one that governs no namespace
            (folder / "none.yaml").write_text(NO_POLICY)
        named = casetable._named_policies()
        expected = sorted(p.name for name in wanted for p in named[name]) or ["governs-nothing"]
        link = self.work / "link.tmp"
        link.symlink_to(folder)
        os.replace(link, self.work / "policies")  # the server sees old or new, never half
        assert wait_for(lambda: self._everywhere(expected), timeout=15), expected
        self.current = wanted

    def _everywhere(self, expected: list[str]) -> bool:
        """Every worker has the new policies: the metrics port's /readyz shows each worker's
        state (a request on the TLS port may land on either worker, so asking there could
        miss the one still reloading)."""
        reply = self.server.plain("GET", "/readyz")
        workers = json.loads(reply.body)["workers"]
        return len(workers) == 2 and all(
            sorted(w["policies"]) == expected and not w["errors"] for w in workers.values())


@pytest.fixture(scope="module")
def case_servers(tls_dir: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[dict[str | None, CaseServer]]:
    servers: dict[str | None, CaseServer] = {}
    try:
        for inventory in sorted({c.inventory for c in CASES}, key=lambda i: i or ""):
            work = tmp_path_factory.mktemp(f"cases-{inventory or 'none'}")
            # A server never runs with no policy at all (that is a source error): start with
            # the bundled ones.
            (work / "policies").symlink_to(BUNDLED_POLICIES)
            namespaces = work / "namespaces.yaml"
            namespaces.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": name, "labels": labels}}
                for name, labels in casetable.NAMESPACES.items()]}))
            args = ["--tls-cert", str(tls_dir / "tls.crt"), "--tls-key", str(tls_dir / "tls.key"),
                    "--policies", str(work / "policies"), "--namespaces", str(namespaces),
                    "--exclude-namespace", "kube-system", "--reload-interval", "0.1"]
            if inventory:
                args += ["--inventory", str(casetable.inventory_file(inventory))]
            servers[inventory] = CaseServer(harness.start(args, work, ca=tls_dir / "ca.crt"), work)
        yield servers
    finally:
        for s in servers.values():
            s.server.stop()


def _mentioned(response: dict[str, Any]) -> str:
    """Everything of a /validate answer a person reads: denial, warnings, audit keys."""
    parts = [response.get("status", {}).get("message", "")]
    parts += response.get("warnings", [])
    parts += list(response.get("auditAnnotations", {}))
    parts += list(response.get("auditAnnotations", {}).values())
    return "\n".join(parts)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_through_the_server(case_servers: dict[str | None, CaseServer],
                                 case: casetable.Case) -> None:
    target = case_servers[case.inventory]
    target.use(case.policies, _TEXTS)
    server = target.server
    req = make_request(case.object, namespace=case.namespace, uid=f"case-{case.id}")
    mutate = server.post("/mutate", envelope(req))
    assert contract.problems(req, mutate, "mutate") == []
    mutated = contract.apply(req, mutate.json["response"])
    for pointer, want in case.mutated.items():
        assert casetable.pointer_get(mutated, pointer) == want, pointer

    allowed, rules = _at_admission(case)
    first = server.post("/validate", envelope(req))
    assert contract.problems(req, first, "validate") == []
    response = first.json["response"]
    assert response["allowed"] is allowed
    text = _mentioned(response)
    for rule in rules:
        assert rule in text or audit_key(rule) in text, (rule, text)
    if not allowed:
        assert response["status"]["code"] == 403

    final = {**req, "object": mutated, "uid": req["uid"] + "-mutated"}
    second = server.post("/validate", envelope(final))
    assert contract.problems(final, second, "validate") == []
    assert second.json["response"]["allowed"] is allowed
    again = server.post("/mutate", envelope(final))
    assert "patch" not in again.json["response"], "second mutation changed the object again"


def _at_admission(case: casetable.Case) -> tuple[bool, set[str]]:
    """The case's verdict and rules at the webhook, which leaves quota to the API server's own
    quota admission (its Context has no ResourceQuotas): the case's, unless a quota refused."""
    if not case.rules & NOT_AT_ADMISSION:
        return case.allowed, set(case.rules)
    context = casetable.context_for(case)
    decision = review(case.object, replace(context, api=without_quotas(context.api)),
                      namespace=case.namespace)
    return decision.allowed, set(case.rules) - NOT_AT_ADMISSION


_TEXTS = _raw_policies()
