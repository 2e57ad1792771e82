"""Every workload kind of DESIGN.md §2.1 yields its pod specs with their own paths."""

from __future__ import annotations

from typing import Any

import pytest

from policies.workloads import WORKLOAD_KINDS, parse_kind_table, pod_specs

POD: dict[str, Any] = {"containers": [{"name": "c"}]}
TPL = {"template": {"spec": POD}}
RAY = {"headGroupSpec": TPL, "workerGroupSpecs": [TPL, TPL]}

KINDS = [
    ("v1", "Pod", {"spec": POD}, [("spec",)]),
    ("v1", "PodTemplate", {"template": {"spec": POD}}, [("template", "spec")]),
    *[("apps/v1", kind, {"spec": TPL}, [("spec", "template", "spec")])
      for kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")],
    ("v1", "ReplicationController", {"spec": TPL}, [("spec", "template", "spec")]),
    ("batch/v1", "Job", {"spec": TPL}, [("spec", "template", "spec")]),
    ("batch/v1", "CronJob", {"spec": {"jobTemplate": {"spec": TPL}}},
     [("spec", "jobTemplate", "spec", "template", "spec")]),
    ("kubeflow.org/v1", "PyTorchJob", {"spec": {"pytorchReplicaSpecs": {"Master": TPL, "Worker": TPL}}},
     [("spec", "pytorchReplicaSpecs", "Master", "template", "spec"),
      ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec")]),
    ("kubeflow.org/v1", "TFJob", {"spec": {"tfReplicaSpecs": {"PS": TPL}}},
     [("spec", "tfReplicaSpecs", "PS", "template", "spec")]),
    ("kubeflow.org/v2beta1", "MPIJob", {"spec": {"mpiReplicaSpecs": {"Launcher": TPL}}},
     [("spec", "mpiReplicaSpecs", "Launcher", "template", "spec")]),
    ("kubeflow.org/v1", "XGBoostJob", {"spec": {"xgbReplicaSpecs": {"Worker": TPL}}},
     [("spec", "xgbReplicaSpecs", "Worker", "template", "spec")]),
    ("kubeflow.org/v1", "PaddleJob", {"spec": {"paddleReplicaSpecs": {"Worker": TPL}}},
     [("spec", "paddleReplicaSpecs", "Worker", "template", "spec")]),
    ("ray.io/v1", "RayCluster", {"spec": RAY},
     [("spec", "headGroupSpec", "template", "spec"),
      ("spec", "workerGroupSpecs", 0, "template", "spec"),
      ("spec", "workerGroupSpecs", 1, "template", "spec")]),
    ("ray.io/v1", "RayJob", {"spec": {"rayClusterSpec": RAY, "submitterPodTemplate": {"spec": POD}}},
     [("spec", "rayClusterSpec", "headGroupSpec", "template", "spec"),
      ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template", "spec"),
      ("spec", "rayClusterSpec", "workerGroupSpecs", 1, "template", "spec"),
      ("spec", "submitterPodTemplate", "spec")]),
    ("ray.io/v1", "RayService", {"spec": {"rayClusterConfig": {"headGroupSpec": TPL}}},
     [("spec", "rayClusterConfig", "headGroupSpec", "template", "spec")]),
    ("jobset.x-k8s.io/v1alpha2", "JobSet",
     {"spec": {"replicatedJobs": [{"template": {"spec": TPL}}]}},
     [("spec", "replicatedJobs", 0, "template", "spec", "template", "spec")]),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
     {"spec": {"leaderWorkerTemplate": {"leaderTemplate": {"spec": POD},
                                        "workerTemplate": {"spec": POD}}}},
     [("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
      ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")]),
    ("batch.volcano.sh/v1alpha1", "Job", {"spec": {"tasks": [TPL, TPL]}},
     [("spec", "tasks", 0, "template", "spec"), ("spec", "tasks", 1, "template", "spec")]),
    ("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"predictor": POD}},
     [("spec", "predictor")]),
    ("v1", "ConfigMap", {"data": {}}, []),
    ("apps/v1", "Deployment", {"spec": {"template": "oops"}}, []),
]


@pytest.mark.parametrize(("api_version", "kind", "body", "paths"), KINDS,
                         ids=[f"{k[0]}/{k[1]}" for k in KINDS])
def test_pod_spec_locations(api_version: str, kind: str, body: dict[str, Any],
                            paths: list[tuple[str | int, ...]]) -> None:
    obj = {"apiVersion": api_version, "kind": kind, **body}
    assert [path for path, _ in pod_specs(obj)] == paths


def test_table_is_extensible() -> None:
    extra = parse_kind_table([{"kind": "Trainer", "apiGroup": "example.com",
                               "podSpecPaths": ["spec.template.spec"]}], "extra.yaml")
    table = WORKLOAD_KINDS.extended(extra)
    obj = {"apiVersion": "example.com/v1", "kind": "Trainer", "spec": TPL}
    assert [p for p, _ in pod_specs(obj, table)] == [("spec", "template", "spec")]
    assert list(pod_specs(obj)) == []
