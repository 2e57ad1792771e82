"""Objects whose metadata, spec or status hold the wrong type reach every door that reads
files (and the --inventory reader) without a traceback: they are read as far as they go."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from webhook import cli

GPU_SPEC = "{containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}"
WORKLOADS = {
    "metadata-a-string": f"apiVersion: v1\nkind: Pod\nmetadata: oops\nspec: {GPU_SPEC}\n",
    "metadata-a-list": f"apiVersion: v1\nkind: Pod\nmetadata: [a]\nspec: {GPU_SPEC}\n",
    "owner-references-a-number": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, ownerReferences: 3}\n"
        f"spec: {{template: {{spec: {GPU_SPEC}}}}}\n"),
    "claim-metadata-a-list": (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: [a]\n"
        "spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com}}]}}\n"),
}
NODES = {
    "spec-a-list": "spec: [1]",
    "allocatable-a-list": "status: {allocatable: [1]}",
    "allocatable-keys-not-strings": "status: {allocatable: {1: '8', nvidia.com/gpu: x}}",
    "taints-a-string": "spec: {taints: x}",
    "labels-a-list": "metadata: {name: m, labels: [1]}",
}


def gpupolicy(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(list(args), out, err)
    return code, err.getvalue()


@pytest.mark.parametrize("command", ["review", "lint", "audit", "explain"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_malformed_workloads_are_read_by_every_door(tmp_path: Path, command: str,
                                                    name: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOADS[name], encoding="utf-8")
    code, err = gpupolicy(command, str(path))
    assert code in (0, 1), err


@pytest.mark.parametrize("name", list(NODES))
def test_malformed_nodes_in_the_inventory_are_read(tmp_path: Path, name: str) -> None:
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\n"
                         f"apiVersion: v1\nkind: Node\n{NODES[name]}\n", encoding="utf-8")
    pod = tmp_path / "pod.yaml"
    pod.write_text(WORKLOADS["metadata-a-string"].replace("metadata: oops", "metadata: {name: p}"),
                   encoding="utf-8")
    for command in ("review", "lint", "audit"):
        code, err = gpupolicy(command, str(pod), "--inventory", str(inventory))
        assert code in (0, 1), (command, err)
