"""Where pod specs live in each workload kind: a data table, extensible by config.

A location is a path pattern: `*` stands for every value of a map (Kubeflow replica specs),
`[]` for every item of a list (Ray worker groups, JobSet replicated jobs, Volcano tasks).
Keys are `Kind`, or `group/Kind` where a kind name is shared (Volcano's `Job`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.paths import FieldPath

PodSpecLocation = tuple[str, ...]

_TEMPLATE = ("spec", "template", "spec")
_RAY_CLUSTER = (
    ("headGroupSpec", "template", "spec"),
    ("workerGroupSpecs", "[]", "template", "spec"),
)


def _kubeflow(replicas_key: str) -> tuple[PodSpecLocation, ...]:
    return (("spec", replicas_key, "*", "template", "spec"),)


WORKLOAD_KINDS: Mapping[str, tuple[PodSpecLocation, ...]] = {
    "Pod": (("spec",),),
    "PodTemplate": (("template", "spec"),),
    "Deployment": (_TEMPLATE,),
    "ReplicaSet": (_TEMPLATE,),
    "StatefulSet": (_TEMPLATE,),
    "DaemonSet": (_TEMPLATE,),
    "ReplicationController": (_TEMPLATE,),
    "Job": (_TEMPLATE,),
    "CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
    "PyTorchJob": _kubeflow("pytorchReplicaSpecs"),
    "TFJob": _kubeflow("tfReplicaSpecs"),
    "MPIJob": _kubeflow("mpiReplicaSpecs"),
    "XGBoostJob": _kubeflow("xgbReplicaSpecs"),
    "PaddleJob": _kubeflow("paddleReplicaSpecs"),
    "JAXJob": _kubeflow("jaxReplicaSpecs"),
    "RayCluster": tuple(("spec", *loc) for loc in _RAY_CLUSTER),
    "RayJob": (
        *(("spec", "rayClusterSpec", *loc) for loc in _RAY_CLUSTER),
        ("spec", "submitterPodTemplate", "spec"),
    ),
    "RayService": tuple(("spec", "rayClusterConfig", *loc) for loc in _RAY_CLUSTER),
    "JobSet": (("spec", "replicatedJobs", "[]", "template", "spec", "template", "spec"),),
    "LeaderWorkerSet": (
        ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
        ("spec", "leaderWorkerTemplate", "workerTemplate", "spec"),
    ),
    "batch.volcano.sh/Job": (("spec", "tasks", "[]", "template", "spec"),),
    "Rollout": (_TEMPLATE,),  # Argo Rollouts
    "InferenceService": (  # KServe: the components are pod specs inline
        ("spec", "predictor"),
        ("spec", "transformer"),
        ("spec", "explainer"),
    ),
}


def locations_for(
    obj: Mapping[str, Any], table: Mapping[str, tuple[PodSpecLocation, ...]] = WORKLOAD_KINDS
) -> tuple[PodSpecLocation, ...]:
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return ()
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    return table.get(f"{group}/{kind}") or table.get(kind) or ()


def pod_specs(
    obj: Mapping[str, Any], table: Mapping[str, tuple[PodSpecLocation, ...]] = WORKLOAD_KINDS
) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    """Every pod spec in `obj` with its own path; missing or mistyped parts yield nothing."""
    for location in locations_for(obj, table):
        yield from _walk(obj, location, ())


def _walk(
    node: Any, location: PodSpecLocation, path: FieldPath
) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    if not location:
        if isinstance(node, dict):
            yield path, node
        return
    step, rest = location[0], location[1:]
    if step == "*":
        if isinstance(node, dict):
            for key, child in node.items():
                yield from _walk(child, rest, (*path, key))
    elif step == "[]":
        if isinstance(node, list):
            for index, child in enumerate(node):
                yield from _walk(child, rest, (*path, index))
    elif isinstance(node, dict) and step in node:
        yield from _walk(node[step], rest, (*path, step))
