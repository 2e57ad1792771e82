"""Fixtures for the cluster tests: a fake API server and a real `kubernetes` client on it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.fakeapi import FakeAPIServer
from webhook.cluster.client import WatchSettings, api_client

# Short timeouts so reconnects, back-off and watch renewal all happen within a test.
FAST = WatchSettings(page_size=2, watch_timeout=2, connect_timeout=1.0, read_timeout=5.0,
                     idle_timeout=4.0, quiet_period=1.0, backoff_initial=0.05, backoff_max=0.2)


@pytest.fixture
def api_server() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kubeconfig(api_server: FakeAPIServer, tmp_path: Path) -> str:
    return api_server.kubeconfig(str(tmp_path / "kubeconfig"))


@pytest.fixture
def client(kubeconfig: str) -> Any:
    return api_client(kubeconfig)


def wait_for(check: Callable[[], Any], timeout: float = 8.0) -> Any:
    """Poll until `check()` is truthy; fail with its last value."""
    deadline = time.monotonic() + timeout
    value = check()
    while not value and time.monotonic() < deadline:
        time.sleep(0.02)
        value = check()
    assert value, f"condition not met within {timeout}s"
    return value


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def node(name: str, product: str = "NVIDIA-A100-SXM4-80GB", gpus: int = 8,
         **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product,
                                              "kubernetes.io/hostname": name, **labels}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                   "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)}},
    }


def gpupolicy(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
            "metadata": {"name": name}, "spec": spec}
