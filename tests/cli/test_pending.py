"""Why a GPU pod is Pending, as `explain` and the audit say it (issue 17 item 14): the pod as it
is (an existing pod does not get the webhook's injection), each pool's first failing filter in
kube-scheduler's words (TaintToleration, NodeAffinity, NodeResourcesFit...), then every reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_review import gpupolicy

NODES = """apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {kubernetes.io/hostname: gpu-1, karpenter.sh/nodepool: a100,
           nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB, nvidia.com/gpu.count: "8"}
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
---
apiVersion: v1
kind: Node
metadata:
  name: cpu-1
  labels: {kubernetes.io/hostname: cpu-1, karpenter.sh/nodepool: general}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
"""
# What `kubectl get pod -o yaml` gives for a pod created before the webhook was installed: no
# toleration, Pending, and the scheduler's own message.
PENDING = """apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers: [{name: c, image: cuda, resources: {limits: {nvidia.com/gpu: 1}}}]
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: Unschedulable
    message: "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)."
"""
TAINT = "node(s) had untolerated taint(s)"  # the taint itself is named after it, in full


def _files(tmp_path: Path, pod: str) -> tuple[str, str]:
    (tmp_path / "nodes.yaml").write_text(NODES)
    (tmp_path / "pod.yaml").write_text(pod)
    return str(tmp_path / "nodes.yaml"), str(tmp_path / "pod.yaml")


def test_explain_names_the_untolerated_taint_of_a_pending_pod(tmp_path: Path) -> None:
    nodes, pod = _files(tmp_path, PENDING)
    done = gpupolicy("explain", pod, "--inventory", nodes)
    assert done.returncode == 1, done.stdout + done.stderr  # fits no pool: it is not "fits"
    assert "pod spec spec: fits NO node pool" in done.stdout
    assert (f"pool a100 (1 node, NVIDIA-A100-SXM4-80GB): {TAINT}\n"
            "      - taint nvidia.com/gpu=present:NoSchedule is not tolerated\n") in done.stdout
    assert ("pool general (1 node, no GPU): Insufficient nvidia.com/gpu\n"
            "      - not enough nvidia.com/gpu: the pod needs 1, a node has none\n") in done.stdout
    [answer] = json.loads(gpupolicy("explain", pod, "--inventory", nodes, "-o", "json").stdout)
    pools = {p["pool"]: p["scheduler"] for p in answer["podSpecs"][0]["pools"]}
    assert pools == {"a100": TAINT, "general": "Insufficient nvidia.com/gpu"}


def test_the_same_pod_as_a_manifest_fits_once_the_webhook_injects_the_toleration(
        tmp_path: Path) -> None:
    nodes, pod = _files(tmp_path, PENDING.partition("status:")[0])
    done = gpupolicy("explain", pod, "--inventory", nodes)
    assert done.returncode == 0, done.stdout
    assert "pool a100 (1 node, NVIDIA-A100-SXM4-80GB): fits" in done.stdout


def test_the_audit_says_why_it_is_pending_in_the_schedulers_words(tmp_path: Path) -> None:
    nodes, pod = _files(tmp_path, PENDING)
    done = gpupolicy("audit", pod, "--inventory", nodes)
    assert f"pool a100: {TAINT} (taint nvidia.com/gpu=present:NoSchedule is not tolerated)" \
        in done.stdout, done.stdout
    assert "once capacity is free" not in done.stdout
