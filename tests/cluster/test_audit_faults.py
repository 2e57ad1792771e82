"""A failed audit changes nothing: a list page that fails is retried like client-go's pager
(back-off, the continue token kept), one that keeps failing fails the whole audit (exit 2 in
every format, what could not be read named, no report printed that would stand for what was
not seen), and `--timeout` bounds a server that does not answer."""

from __future__ import annotations

import base64
import io
import json
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.cluster.conftest import gpupolicy, namespace
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.test_audit import NODES, _pod
from webhook.cli import run as cli
from webhook.inputs import reading

PODS = "/api/v1/pods"
MAX_ONE = {"rules": {"maxGPUsPerPod": 1}}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _cluster(server: FakeAPIServer, namespaces: int = 10, pods: int = 11) -> None:
    """`namespaces` namespaces of `pods` pods each, every pod asking for 2 GPUs (refused)."""
    server.add_all([gpupolicy("max-one", **MAX_ONE), *reading.read_objects(NODES)])
    for n in range(namespaces):
        server.add(namespace(f"team-{n}"))
        server.add_all(_pod(f"p{i:02}", f"team-{n}", node="a100-1", gpus=2)
                       for i in range(pods))


def _page_tokens(server: FakeAPIServer, path: str) -> list[str]:
    """The continue token of each list request of `path`, in order ("" for the first page)."""
    tokens = []
    for request in server.requests:
        method, _, target = request.partition(" ")
        url = urlsplit(target)
        if method == "GET" and url.path == path and "watch" not in url.query:
            tokens.append(parse_qs(url.query).get("continue", [""])[0])
    return tokens


def test_a_failing_page_is_asked_for_again_with_its_continue_token(api_server, kubeconfig):
    _cluster(api_server)
    api_server.fault_page(PODS, 3, 500, times=2)  # passes on the third try
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "-o", "json",
                          "--page-size", "20")
    assert code == 1, err
    report = json.loads(out)
    assert report["summary"]["audited"] == {"Pod": 110}
    assert report["summary"]["unavailable"] == {}
    tokens = _page_tokens(api_server, PODS)
    third = tokens[2]
    assert third and tokens[2:5] == [third] * 3  # the same page again, not the list restarted
    assert json.loads(base64.b64decode(third))["page"] == 3
    assert len(tokens) == 6 + 2


@pytest.mark.parametrize("fmt", ["text", "json", "policyreport", "openreports"])
def test_a_page_that_keeps_failing_fails_the_audit_in_every_format(api_server, kubeconfig,
                                                                     fmt):
    _cluster(api_server)
    api_server.fault_page(PODS, 3, 500, times=100)
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "-o", fmt, "--page-size", "20")
    assert code == 2
    assert "could not read Pod (v1): HTTP 500" in err and "Traceback" not in err
    assert len(_page_tokens(api_server, PODS)) == 2 + 4  # four tries of page 3, then no more
    if fmt in ("policyreport", "openreports"):
        assert out == ""  # reports would clear the failures of the pods it did not see
        assert "no report printed" in err
    elif fmt == "text":
        assert out.startswith("INCOMPLETE AUDIT")
        assert "Not audited: Pod (v1): HTTP 500" in out
    else:
        assert json.loads(out)["summary"]["unavailable"] == {"Pod (v1)": "HTTP 500 Internal "
                                                             "Server Error"}


@pytest.mark.parametrize("path", [PODS, "/apis/apps/v1/deployments"])
def test_a_kind_refused_on_its_first_page_is_no_clean_audit(api_server, kubeconfig, path):
    _cluster(api_server, namespaces=2, pods=2)
    api_server.fault_page(path, 1, 403, times=100)
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig)
    assert code == 2
    assert "HTTP 403" in err
    assert len(_page_tokens(api_server, path)) == 1  # a 403 will not change: not retried
    assert out.startswith("INCOMPLETE AUDIT")


@pytest.mark.parametrize("status", [403, 500])
def test_a_gpupolicy_list_that_fails_fails_the_audit(api_server, kubeconfig, status):
    _cluster(api_server, namespaces=1, pods=1)
    api_server.fault_page("/apis/gpupolicy.io/v1alpha1/gpupolicies", 1, status, times=100)
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "-o", "policyreport")
    assert code == 2 and out == ""
    assert f"cannot list GPUPolicy objects: HTTP {status}" in err


def test_a_hung_page_is_bounded_by_the_timeout(api_server, kubeconfig):
    _cluster(api_server, namespaces=2, pods=2)
    api_server.fault_page(PODS, 1, 500, hang=20)
    started = time.monotonic()
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "-o", "policyreport",
                          "--timeout", "2")
    assert time.monotonic() - started < 8
    assert code == 2 and out == ""
    assert "did not finish within --timeout 2s" in err


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_timeout_must_be_a_positive_number(value):
    code, _, err = _cli("audit", "--timeout", value)
    assert code == 2 and "--timeout" in err
