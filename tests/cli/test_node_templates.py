"""A node template that cannot be read (an instance type the catalog does not know, a
requirement Karpenter does not read) is reported with its path in every door and never
counted as capacity: the audit lists it as a cluster finding (`node-template-invalid`, a
warning), lint, review and explain say it on stderr; none of them refuses for it or stops."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from webhook.cli import run

NODE_POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu-l4-spot}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: %s}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: infer, namespace: ml}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/tritonserver:24.01-py3
    resources: {limits: {nvidia.com/gpu: 1}}
"""
BAD = "spec.template.spec.requirements[0].values[%d]: instance type p9.mega is not in the GPU " \
    "catalog"

# (instance types, the pod is admitted, the unknown type's index (None: nothing to say))
ROWS = [
    ("[g6.xlarge, p9.mega]", True, 1),  # g6.xlarge (one L4) still runs it
    ("[p9.mega]", False, 0),  # nothing readable: no capacity, the pod fits nothing
    ("[g6.xlarge]", True, None),
]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("types", "admitted", "index"), ROWS, ids=["one-unknown", "all-unknown",
                                                                    "known"])
def test_an_unreadable_template_is_a_finding_with_its_path(tmp_path: Path, types: str,
                                                           admitted: bool, index: int | None
                                                           ) -> None:
    said = index is not None
    bad = BAD % (index or 0)
    inventory, pod, dump = tmp_path / "pools.yaml", tmp_path / "pod.yaml", tmp_path / "dump.yaml"
    inventory.write_text(NODE_POOL % types, encoding="utf-8")
    pod.write_text(POD, encoding="utf-8")
    dump.write_text(f"{NODE_POOL % types}---\n{POD}", encoding="utf-8")

    code, out, err = _cli("audit", str(dump), "-o", "json")
    assert code == (0 if admitted else 1), err
    assert "skipping node template" not in err  # said once, as the finding
    facts = [f for f in json.loads(out)["findings"] if f["rule"] == "node-template-invalid"]
    assert [(f["severity"], bad in f["message"]) for f in facts] == \
        ([("warning", True)] if said else [])

    for command in ("lint", "review", "explain"):
        code, out, err = _cli(command, "--inventory", str(inventory), str(pod))
        assert code == (0 if admitted else 1), err
        assert (bad in err) is said
        assert "node-template-invalid" not in out  # a warning about the inventory, not the pod
