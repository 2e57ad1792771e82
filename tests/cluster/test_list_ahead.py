"""The audit asks for the next page while it judges the current one, and never for more:
one page ahead at most, so its memory does not grow with the cluster. The real client on the
fake API server; requests counted as the server received them."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.cluster.fakeapi import FakeAPIServer
from webhook.cluster.client import api_client, list_all
from webhook.cluster.kube import Lister

PODS = 21  # 11 pages of 2


def _pods(api_server: FakeAPIServer) -> None:
    api_server.add_all({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"p{i:02}", "namespace": "ml"}, "spec": {}}
                       for i in range(PODS))


def _asked(api_server: FakeAPIServer) -> int:
    return sum(1 for r in list(api_server.requests) if r.startswith("GET /api/v1/pods?"))


@pytest.mark.parametrize("ahead", [True, False])
def test_at_most_one_page_ahead(api_server: FakeAPIServer, client: Any, ahead: bool) -> None:
    _pods(api_server)
    api_server.page_delay = 0.01
    seen: list[str] = []
    most_ahead = 0
    for taken, page in enumerate(list_all(Lister(client, "/api/v1/pods"), limit=2,
                                          ahead=ahead), start=1):
        seen += [p["metadata"]["name"] for p in page.items]
        time.sleep(0.1)  # judging the page: time for any request ahead to reach the server
        most_ahead = max(most_ahead, _asked(api_server) - taken)
    assert seen == [f"p{i:02}" for i in range(PODS)]  # every pod once, in order
    assert most_ahead == (1 if ahead else 0)
    assert _asked(api_server) == (PODS + 1) // 2  # no page asked for twice, none past the end


def test_a_failing_page_ahead_fails_when_reached(api_server: FakeAPIServer, client: Any) -> None:
    _pods(api_server)
    api_server.fault_page("/api/v1/pods", 3, 403)
    pages = list_all(Lister(client, "/api/v1/pods"), limit=2, ahead=True)
    assert [len(next(pages).items) for _ in range(2)] == [2, 2]  # fetched while page 2 waits
    with pytest.raises(ApiException) as raised:
        next(pages)
    assert raised.value.status == 403


def test_an_expired_token_ahead_restarts_the_list_without_repeats(
        api_server: FakeAPIServer, client: Any) -> None:
    _pods(api_server)
    pages = list_all(Lister(client, "/api/v1/pods"), limit=2, ahead=True)
    seen = [p["metadata"]["name"] for p in next(pages).items]
    # the page ahead may be in already: compact, then let a page ahead meet the 410
    api_server.compact()
    for page in pages:
        seen += [p["metadata"]["name"] for p in page.items]
        api_server.compact()
    assert seen == [f"p{i:02}" for i in range(PODS)]


def test_lists_by_path_carry_an_exec_plugins_token(api_server: FakeAPIServer,
                                                   tmp_path: Any) -> None:
    """The audit lists by path through the client's ApiClient: the credentials kubeconfig
    gives (here an exec credential plugin, as EKS and GKE use) still reach the server."""
    plugin = tmp_path / "token-plugin.py"
    plugin.write_text(
        "import json\nprint(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',"
        " 'kind': 'ExecCredential', 'status': {'token': 'from-the-plugin'}}))\n")
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters:\n- name: fake\n  cluster: {{server: '{api_server.url}'}}\n"
        "users:\n- name: fake\n  user:\n    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1\n"
        f"      command: {sys.executable}\n      args: ['{plugin}']\n"
        "      interactiveMode: Never\n"
        "contexts:\n- name: fake\n  context: {cluster: fake, user: fake}\n")
    _pods(api_server)
    pages = list(list_all(Lister(api_client(str(config)), "/api/v1/pods"), limit=10,
                          ahead=True))
    assert sum(len(p.items) for p in pages) == PODS
    assert set(api_server.authorizations) == {"Bearer from-the-plugin"}
