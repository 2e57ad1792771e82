"""A tiny read-only Kubernetes API on 127.0.0.1, just enough for `helm template --dry-run=server`.

Helm runs `lookup` only when it talks to a cluster. This server answers discovery for the kinds
the chart renders, 404 for every object except the Secrets it is given, and logs each path, so a
test can run the chart's real `lookup` logic (no cluster can run here, DESIGN.md §6).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# (group, version) -> [(resource, kind, namespaced)]
RESOURCES: dict[tuple[str, str], list[tuple[str, str, bool]]] = {
    ("", "v1"): [("secrets", "Secret", True), ("services", "Service", True),
                 ("serviceaccounts", "ServiceAccount", True), ("configmaps", "ConfigMap", True),
                 ("pods", "Pod", True), ("namespaces", "Namespace", False)],
    ("apps", "v1"): [("deployments", "Deployment", True)],
    ("batch", "v1"): [("cronjobs", "CronJob", True), ("jobs", "Job", True)],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    ("rbac.authorization.k8s.io", "v1"): [
        ("clusterroles", "ClusterRole", False),
        ("clusterrolebindings", "ClusterRoleBinding", False),
        ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
    ("admissionregistration.k8s.io", "v1"): [
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False)],
    ("apiextensions.k8s.io", "v1"): [
        ("customresourcedefinitions", "CustomResourceDefinition", False)],
    ("networking.k8s.io", "v1"): [("networkpolicies", "NetworkPolicy", True)],
    ("discovery.k8s.io", "v1"): [("endpointslices", "EndpointSlice", True)],
}


def _resource_list(group: str, version: str) -> dict[str, Any]:
    return {
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [
            {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}
            for name, kind, namespaced in RESOURCES[(group, version)]
        ],
    }


def _discovery(path: str) -> dict[str, Any] | None:
    if path == "/version":
        return {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"]}
    if path == "/api/v1":
        return _resource_list("", "v1")
    if path == "/apis":
        groups = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                   "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
                  for g, v in RESOURCES if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    parts = tuple(path.removeprefix("/apis/").split("/"))
    if path.startswith("/apis/") and len(parts) == 2 and parts in RESOURCES:
        return _resource_list(*parts)
    return None


class FakeAPIServer:
    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, Any]] = {}  # API path -> Secret
        self.lists: dict[str, list[dict[str, Any]]] = {}  # API path of a list -> its items
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def put_secret(self, secret: dict[str, Any]) -> None:
        meta = secret["metadata"]
        self.secrets[f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}"] = secret

    def kubeconfig(self, directory: Path) -> Path:
        path = directory / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }), encoding="utf-8")
        path.chmod(0o600)
        return path

    def _answer(self, path: str) -> dict[str, Any] | None:
        if path in self.secrets:
            return self.secrets[path]
        if path in self.lists:
            return {"kind": "List", "apiVersion": "v1", "metadata": {},
                    "items": self.lists[path]}
        if path.endswith("/secrets"):  # helm's release storage: no earlier releases
            return {"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": []}
        return _discovery(path)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                fake.requests.append(path)
                body = fake._answer(path)
                status = 200 if body is not None else 404
                if body is None:
                    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "NotFound", "code": 404}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[FakeAPIServer]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(timeout=5)
