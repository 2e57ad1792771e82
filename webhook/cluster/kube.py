"""Requests by path through the Kubernetes client's ApiClient: its kubeconfig, exec
credential plugins, tokens and TLS, without its generated API classes.

Lists and reads are taken as raw JSON (webhook/cluster/client.py says why), so the typed
`CoreV1Api`, `AppsV1Api`… only name a path here: importing one builds hundreds of pydantic
models and argument validators, some 0.6 s of an audit (`python -X importtime`). The
ApiClient, its REST layer and `kubernetes.config` are all a run needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes.client.api_client import ApiClient
from kubernetes.client.exceptions import ApiException

_ACCEPT = {"Accept": "application/json"}


def resource_path(api_version: str, plural: str, namespace: str | None = None,
                  name: str | None = None) -> str:
    """`/api/v1/pods`, `/apis/apps/v1/namespaces/ml/deployments/train`…"""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    where = f"/namespaces/{namespace}" if namespace is not None else ""
    return f"{root}{where}/{plural}" + (f"/{name}" if name is not None else "")


def get(api: ApiClient, path: str, query: Iterable[tuple[str, Any]] = (),
        timeout: float | tuple[float, float] | None = None) -> Any:
    """GET `path`: the urllib3 response, unread, as the generated methods give it with
    `_preload_content=False`; an error status raises ApiException as they do."""
    params = api.param_serialize("GET", path, query_params=list(query),
                                 header_params=dict(_ACCEPT), auth_settings=["BearerToken"])
    resp = api.call_api(*params, _request_timeout=timeout)
    if not 200 <= resp.status <= 299:
        resp.read()  # type: ignore[no-untyped-call]
        raise ApiException.from_response(http_resp=resp, body=None, data=None)
    return resp.response


class Lister:
    """A list call for webhook.cluster.client.list_page, like a generated `list_*` method
    bound to its path: `limit`, `_continue` and `_request_timeout` as they take them."""

    def __init__(self, api: ApiClient, path: str) -> None:
        self.api, self.path = api, path

    def __call__(self, *, limit: int | None = None, _continue: str | None = None,
                 _request_timeout: float | tuple[float, float] | None = None,
                 **_: Any) -> Any:
        query: list[tuple[str, Any]] = []
        if limit is not None:
            query.append(("limit", limit))
        if _continue:
            query.append(("continue", _continue))
        return get(self.api, self.path, query, _request_timeout)

    def __repr__(self) -> str:
        return f"Lister({self.path})"
