"""The API groups, versions and kinds gpupolicy reads from a cluster (and writes its reports
as), which of them an audit lists, and what is kept of a Node.

No `kubernetes` import here: an offline audit reads files through the same tables, and a
command that never talks to a cluster must not pay for loading the client. The built-in kinds
name their API class (`AppsV1Api`) as a string, looked up in the client when listing live.
"""

from __future__ import annotations

import functools
from typing import Any

from policies.engine import is_claim
from policies.workloads import WORKLOAD_KINDS, KindTable, WorkloadKind, locations_for
from webhook.inputs import reading

GROUP, VERSION, PLURAL = "gpupolicy.io", "v1alpha1", "gpupolicies"
DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"  # GA since Kubernetes 1.34
# (API group, resource) of everything serve watches: the chart's ClusterRole grants exactly this.
# Node templates (optional CRDs: Karpenter, Cluster API): (group, version, plural, kind).
TEMPLATE_RESOURCES = (
    ("karpenter.sh", "v1", "nodepools", "NodePool"),
    ("cluster.x-k8s.io", "v1beta1", "machinedeployments", "MachineDeployment"),
    ("cluster.x-k8s.io", "v1beta1", "machinesets", "MachineSet"),
    ("cluster.x-k8s.io", "v1beta1", "machinepools", "MachinePool"),
)
WATCHED = (("", "namespaces"), ("", "nodes"), ("", "limitranges"), (GROUP, PLURAL),
           (DRA_GROUP, "resourceslices"), (DRA_GROUP, "deviceclasses"),
           (DRA_GROUP, "devicetaintrules"),
           (DRA_GROUP, "resourceclaims"), (DRA_GROUP, "resourceclaimtemplates"),
           ("scheduling.k8s.io", "priorityclasses"), ("node.k8s.io", "runtimeclasses"),
           *((group, plural) for group, _, plural, _ in TEMPLATE_RESOURCES))
# What the audit lists besides: ResourceQuotas (serve leaves quota to the API server's own
# quota admission, so it has no need of them).
AUDIT_ONLY = (("", "resourcequotas"),)
# The namespaced DRA objects pods name in spec.resourceClaims: (plural, kind).
CLAIM_RESOURCES = (("resourceclaims", "ResourceClaim"),
                   ("resourceclaimtemplates", "ResourceClaimTemplate"))

# Built-in workload kinds: (kind, apiVersion, resource (plural))
BUILT_IN = (
    ("Deployment", "apps/v1", "deployments"),
    ("StatefulSet", "apps/v1", "statefulsets"),
    ("DaemonSet", "apps/v1", "daemonsets"),
    ("ReplicaSet", "apps/v1", "replicasets"),
    ("ReplicationController", "v1", "replicationcontrollers"),
    ("Job", "batch/v1", "jobs"),
    ("CronJob", "batch/v1", "cronjobs"),
    ("PodTemplate", "v1", "podtemplates"),
)
PODS = ("Pod", "v1", "pods")
# Custom workload kinds: (kind, group, versions to try in order, plural). The first version
# the API server serves is used (a cluster serves every object under each of its versions).
CUSTOM = (
    ("PyTorchJob", "kubeflow.org", ("v1",), "pytorchjobs"),
    ("TFJob", "kubeflow.org", ("v1",), "tfjobs"),
    ("MPIJob", "kubeflow.org", ("v2beta1", "v1"), "mpijobs"),
    ("XGBoostJob", "kubeflow.org", ("v1",), "xgboostjobs"),
    ("PaddleJob", "kubeflow.org", ("v1",), "paddlejobs"),
    ("JAXJob", "kubeflow.org", ("v1",), "jaxjobs"),
    ("RayCluster", "ray.io", ("v1", "v1alpha1"), "rayclusters"),
    ("RayJob", "ray.io", ("v1", "v1alpha1"), "rayjobs"),
    ("RayService", "ray.io", ("v1", "v1alpha1"), "rayservices"),
    ("JobSet", "jobset.x-k8s.io", ("v1alpha2",), "jobsets"),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io", ("v1",), "leaderworkersets"),
    ("Job", "batch.volcano.sh", ("v1alpha1",), "jobs"),
    ("Rollout", "argoproj.io", ("v1alpha1",), "rollouts"),
    ("InferenceService", "serving.kserve.io", ("v1beta1",), "inferenceservices"),
    ("Notebook", "kubeflow.org", ("v1", "v1beta1"), "notebooks"),
    ("TrainJob", "trainer.kubeflow.org", ("v1alpha1",), "trainjobs"),
    ("Workflow", "argoproj.io", ("v1alpha1",), "workflows"),
    ("WorkflowTemplate", "argoproj.io", ("v1alpha1",), "workflowtemplates"),
    ("CronWorkflow", "argoproj.io", ("v1alpha1",), "cronworkflows"),
    ("Service", "serving.knative.dev", ("v1",), "services"),
    ("SparkApplication", "sparkoperator.k8s.io", ("v1beta2",), "sparkapplications"),
    ("ScheduledSparkApplication", "sparkoperator.k8s.io", ("v1beta2",),
     "scheduledsparkapplications"),
    ("NIMService", "apps.nvidia.com", ("v1alpha1",), "nimservices"),
    # DRA claims are reviewed as objects of their own (DESIGN.md §2.4); 404 before 1.34
    *((kind, DRA_GROUP, (DRA_VERSION,), plural) for plural, kind in CLAIM_RESOURCES),
)
# Groups a cluster serves the built-in kinds under, old manifests included (extensions/v1beta1)
_BUILT_IN_GROUPS = {"", "apps", "extensions", "batch"}
_AUDITED = {("", "Pod")} | {(g, kind) for kind, _, _ in BUILT_IN for g in _BUILT_IN_GROUPS} | {
    (group, kind) for kind, group, _, _ in CUSTOM}
# (group, plural) pairs the fixed tables list: a table entry naming one is not listed twice
_LISTED_RESOURCES = {(group, plural) for _, group, _, plural in CUSTOM}

# `audit --apply`'s reports: format -> (group, version, namespaced plural, cluster plural)
REPORT_RESOURCES = {
    "openreports": ("openreports.io", "v1alpha1", "reports", "clusterreports"),
    "policyreport": ("wgpolicyk8s.io", "v1alpha2", "policyreports", "clusterpolicyreports"),
}
# `--report-api auto` takes the first one installed: OpenReports is where the wgpolicyk8s API
# moved (Kyverno writes it since 1.15; Policy Reporter reads both).
REPORT_PREFERRED = ("openreports", "policyreport")
REPORT_CHOICES = ("auto", "openreports", "policyreport", "both")


def audited_kind(obj: dict[str, Any], table: KindTable = WORKLOAD_KINDS) -> bool:
    """Whether a live audit would list this object: a file holds only what a cluster can.
    Besides the fixed kinds, the live audit lists every kind of `table` in an API group
    (found through discovery), so those are audited from files too."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return False
    if (group, kind) in _AUDITED:
        return bool(locations_for(obj)) or is_claim(obj)
    return (group, kind) in _discovered_keys(table) and bool(locations_for(obj, table))


@functools.lru_cache(maxsize=4)
def _discovered_keys(table: KindTable) -> frozenset[tuple[str, str]]:
    return frozenset((k.group, k.kind) for k in discovered_kinds(table) if k.resource)


def discovered_kinds(table: KindTable) -> list[WorkloadKind]:
    """The kinds of `table` the fixed tables (BUILT_IN, CUSTOM, Pods) do not list: the live
    audit finds their version through API discovery. Core-group kinds are not among them
    (every core kind that carries a pod is built in; discovery of /apis does not cover /api)."""
    seen = set(_LISTED_RESOURCES)
    out = []
    for k in table.kinds:
        if not k.group or (k.group, k.kind) in _AUDITED or (k.group, k.resource) in seen:
            continue
        seen.add((k.group, k.resource))
        out.append(k)
    return out


NODE_INFO = ("osImage", "kernelVersion", "containerRuntimeVersion", "kubeletVersion")


def node_facts(obj: dict[str, Any]) -> dict[str, Any]:
    """What the Inventory reads of a Node; conditions and heartbeats are dropped, and parts of
    the wrong type read as empty (policies.inventory reads the rest as warily)."""
    meta, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
    return {
        "kind": "Node",
        "metadata": {"name": meta.get("name"), "labels": reading.labels_of(obj)},
        "spec": {"taints": spec.get("taints") or [],
                 "unschedulable": bool(spec.get("unschedulable"))},
        "status": {"allocatable": status.get("allocatable") or {},
                   "capacity": status.get("capacity") or {},
                   # the versions the node facts and the pool view compare
                   "nodeInfo": {k: v for k, v in _mapping(status.get("nodeInfo")).items()
                                if k in NODE_INFO and isinstance(v, str)}},
    }


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
