"""Node, Pod and DaemonSet objects in the shape `kubectl get nodes,pods,daemonsets -A -o yaml`
writes them (every field a kubelet, GFD and the API server fill), built from a few facts, for
the pool view's case tables. `python -m tests.pools.shapes` rewrites data/cluster.yaml, the
dump the node-fact table reads."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import yaml

T0 = "2026-05-01T12:00:00Z"  # the dump was taken then (audit --now)
HERE = Path(__file__).parent


def _uid(name: str) -> str:
    h = hashlib.sha1(name.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def node(name: str, *, pool: str = "", pool_label: str = "karpenter.sh/nodepool",
         product: str = "NVIDIA-A100-SXM4-80GB", gpus: int = 8, advertised: int | None = None,
         allocatable_gpus: int | None = None, driver: str = "535.104.05",
         cuda: str = "12.2", os_image: str = "Ubuntu 22.04.4 LTS",
         runtime: str = "containerd://1.7.13", taints: list[dict[str, str]] | None = None,
         reserved: bool = True, memory_mib: int = 81920, extra_labels: dict[str, str] | None
         = None, extra_allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    major, minor, rev = [*driver.split("."), "", ""][:3]
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "nvidia.com/gpu.present": "true",
    }
    if pool:
        labels[pool_label] = pool
    if gpus:
        labels.update({
            "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.memory": str(memory_mib), "nvidia.com/gpu.family": "ampere",
            "nvidia.com/gpu.machine": "p4d.24xlarge", "nvidia.com/gfd.timestamp": "1714564800",
            "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.driver-version.full": driver,
            "nvidia.com/cuda.runtime.major": cuda.split(".")[0],
            "nvidia.com/cuda.runtime.minor": cuda.split(".")[1],
            "nvidia.com/cuda.runtime-version.full": cuda,
        })
    labels.update(extra_labels or {})
    advertised = gpus if advertised is None else advertised
    cpu_cap, mem_cap = "96", "1123456780Ki"
    capacity = {"cpu": cpu_cap, "ephemeral-storage": "203056560Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": mem_cap, "pods": "110"}
    allocatable = {"cpu": "95690m" if reserved else cpu_cap,
                   "ephemeral-storage": "186026522779",
                   "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                   "memory": "1110000000Ki" if reserved else mem_cap, "pods": "110"}
    if advertised:
        capacity["nvidia.com/gpu"] = str(advertised)
        allocatable["nvidia.com/gpu"] = str(advertised if allocatable_gpus is None
                                            else allocatable_gpus)
    allocatable.update(extra_allocatable or {})
    capacity.update(extra_allocatable or {})
    spec: dict[str, Any] = {"providerID": f"aws:///us-east-1a/i-{_uid(name)[:17]}"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "creationTimestamp": "2026-04-01T08:00:00Z", "labels": labels, "name": name,
            "resourceVersion": "123456", "uid": _uid(name)},
        "spec": spec,
        "status": {
            "addresses": [{"address": "10.0.0.1", "type": "InternalIP"},
                          {"address": name, "type": "Hostname"}],
            "allocatable": allocatable, "capacity": capacity,
            "conditions": [{"lastHeartbeatTime": T0, "lastTransitionTime": "2026-04-01T08:01:00Z",
                            "message": "kubelet is posting ready status", "reason":
                            "KubeletReady", "status": "True", "type": "Ready"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": _uid(name + "boot"),
                         "containerRuntimeVersion": runtime,
                         "kernelVersion": "5.15.0-1056-aws", "kubeProxyVersion": "v1.30.0",
                         "kubeletVersion": "v1.30.0", "machineID": _uid(name)[:32],
                         "operatingSystem": "linux", "osImage": os_image,
                         "systemUUID": _uid(name + "sys")}},
    }


GPU_TOLERATION = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}


def pod(name: str, *, namespace: str = "ml", node_name: str = "", gpus: int = 1,
        resource: str = "nvidia.com/gpu", phase: str = "Running", created: str = T0,
        tolerations: list[dict[str, Any]] | None = None, node_selector: dict[str, str] |
        None = None, annotations: dict[str, str] | None = None,
        container_status: dict[str, Any] | None = None, reason: str = "",
        message: str = "", priority_class: str = "") -> dict[str, Any]:
    container = {"image": "nvcr.io/nvidia/pytorch:24.01-py3", "imagePullPolicy": "IfNotPresent",
                 "name": "main", "resources": {"limits": {resource: str(gpus)},
                                               "requests": {resource: str(gpus)}},
                 "terminationMessagePath": "/dev/termination-log",
                 "terminationMessagePolicy": "File"}
    spec: dict[str, Any] = {
        "containers": [container], "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "securityContext": {},
        "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
        "tolerations": [
            *(tolerations if tolerations is not None else [GPU_TOLERATION]),
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
             "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
             "operator": "Exists", "tolerationSeconds": 300}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if priority_class:
        spec["priorityClassName"] = priority_class
    status: dict[str, Any] = {"phase": phase, "qosClass": "BestEffort"}
    if phase == "Pending" and not node_name:
        status["conditions"] = [{
            "lastProbeTime": None, "lastTransitionTime": created,
            "message": f"0/12 nodes are available: 12 Insufficient {resource}. preemption: "
                       "0/12 nodes are available: 12 No preemption victims found for "
                       "incoming pod.", "reason": "Unschedulable", "status": "False",
            "type": "PodScheduled"}]
    else:
        status.update({"hostIP": "10.0.0.1", "podIP": "10.1.0.5", "startTime": created,
                       "containerStatuses": [{
                           "containerID": "containerd://" + hashlib.sha1(name.encode())
                           .hexdigest(), "image": container["image"], "imageID": "",
                           "lastState": {}, "name": "main", "ready": phase == "Running",
                           "restartCount": 0, "started": phase == "Running",
                           "state": {"running": {"startedAt": created}},
                           **(container_status or {})}]})
    if reason:
        status["reason"] = reason
        status["message"] = message
    meta: dict[str, Any] = {"creationTimestamp": created, "name": name, "namespace": namespace,
                            "resourceVersion": "222", "uid": _uid(namespace + name)}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def daemonset(name: str, namespace: str, image: str,
              tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "containers": [{"image": image, "imagePullPolicy": "IfNotPresent", "name": name,
                        "ports": [{"containerPort": 9400, "name": "metrics",
                                   "protocol": "TCP"}], "resources": {}}],
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"nvidia.com/gpu.present": "true"}}
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"annotations": {"deprecated.daemonset.template.generation": "1"},
                     "creationTimestamp": "2026-04-01T08:00:00Z", "generation": 1,
                     "labels": {"app.kubernetes.io/name": name}, "name": name,
                     "namespace": namespace, "resourceVersion": "333",
                     "uid": _uid(namespace + name)},
        "spec": {"revisionHistoryLimit": 10,
                 "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": name}},
                              "spec": pod_spec},
                 "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                                    "type": "RollingUpdate"}},
        "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                   "numberMisscheduled": 0, "numberReady": 0, "observedGeneration": 1}}


def dump(items: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "items": items, "kind": "List",
                           "metadata": {"resourceVersion": ""}}, sort_keys=False, width=100)


TAINT = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
CGPU = {"ack.node.gpu.schedule": "cgpu", "aliyun.accelerator/nvidia_name": "Tesla-T4",
        "aliyun.accelerator/nvidia_count": "1", "aliyun.accelerator/nvidia_mem": "15109MiB"}


def cluster() -> list[dict[str, Any]]:
    """A small cluster with every node fact once (data/cluster.yaml)."""
    items = [
        node("train-1", pool="train", taints=TAINT),
        node("train-2", pool="train", taints=TAINT, allocatable_gpus=7),
        node("train-3", pool="train", taints=TAINT, driver="470.82.01",
             os_image="CentOS Linux 7 (Core)"),
        node("train-4", pool="train"),
        node("infer-1", pool="infer-l4", pool_label="cloud.google.com/gke-nodepool",
             product="NVIDIA-L4", gpus=1, advertised=0, reserved=False, memory_mib=23034),
        node("infer-2", pool="infer-l4", pool_label="cloud.google.com/gke-nodepool",
             product="NVIDIA-L4", gpus=1, reserved=False, memory_mib=23034),
        node("old-1", pool="legacy", product="Tesla-V100-SXM2-16GB", gpus=4,
             driver="410.48", runtime="docker://18.9.7", os_image="Ubuntu 18.04.6 LTS"),
        node("a10-1", pool="cgpu-a10", product="NVIDIA-A10", gpus=0, advertised=0,
             extra_labels={**CGPU, "aliyun.accelerator/nvidia_name": "NVIDIA-A10"},
             extra_allocatable={"aliyun.com/gpu-mem": "24", "aliyun.com/gpu-count": "1"}),
        node("t4-2", pool="cgpu", product="Tesla-T4", gpus=0, advertised=0,
             extra_labels=CGPU, extra_allocatable={"aliyun.com/gpu-mem": "15",
                                                   "aliyun.com/gpu-count": "1"}),
        daemonset("dcgm-exporter", "monitoring", "nvcr.io/nvidia/k8s/dcgm-exporter:"
                  "3.3.5-3.4.1-ubuntu22.04"),
        daemonset("nvidia-device-plugin-daemonset", "kube-system",
                  "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
                  tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",
                                "effect": "NoSchedule"}]),
    ]
    for i in range(21):
        items.append(pod(f"notebook-{i}", namespace="dev", node_name="a10-1", gpus=1,
                         resource="aliyun.com/gpu-mem", tolerations=[],
                         annotations={"ALIYUN_COM_GPU_MEM_IDX": "0",
                                      "ALIYUN_COM_GPU_MEM_POD": "1",
                                      "ALIYUN_COM_GPU_MEM_DEV": "15"}))
    for i in range(2):
        items.append(pod(f"infer-{i}", namespace="dev", node_name="t4-2", gpus=8,
                         resource="aliyun.com/gpu-mem", tolerations=[],
                         annotations={"ALIYUN_COM_GPU_MEM_IDX": "0",
                                      "ALIYUN_COM_GPU_MEM_POD": "8",
                                      "ALIYUN_COM_GPU_MEM_DEV": "15"}))
    items.append(pod("train-a", node_name="train-1", gpus=8))
    items.append(pod("train-b", node_name="train-2", gpus=4))
    items.append(pod("waiting-8", gpus=8, phase="Pending", created="2026-05-01T10:00:00Z"))
    return items


if __name__ == "__main__":
    (HERE / "data" / "cluster.yaml").write_text(dump(cluster()), encoding="utf-8")
    sys.exit(0)
