"""The bundled workload-kinds table (DESIGN.md §2.5): data, in exactly the form of a
`--workload-kinds` file, and checked by the same parser (policies/workloads.py) at import. It is
a Python literal rather than a YAML file only because policies/ reads no files.

podSpecPaths: dot paths to pod specs; `*` = every value of a map, `name[]` = every list item.
containerPaths (optional): container-like objects inside each pod spec besides containers,
  initContainers and ephemeralContainers; `.` is the pod spec itself. An item may be a map
  {path, resourcesField, gpuField} when the GPU is not under `resources`.
podFields (optional): the pod-level fields the kind takes there, so injection writes only those
  (default: tolerations, nodeSelector, affinity, runtimeClassName, priorityClassName). Empty:
  the GPU demand is checked, nothing is injected, and the decision says so.
podFieldsPath (optional): where those pod-level fields go when the kind keeps them apart from
  the pod spec's containers, from the object's root; `name[key=value]` is the item of list
  `name` whose `key` is `value`, added (with the maps below it) when absent.
"""

from __future__ import annotations

from typing import Any

_ARGO_CONTAINERS = ["container", "script", "containerSet.containers[]", "sidecars[]"]
_ARGO_FIELDS = ["tolerations", "nodeSelector", "affinity", "priorityClassName"]
_SPARK_CONTAINERS: list[Any] = [{"path": ".", "gpuField": "gpu"}, "sidecars[]"]
_SPARK_FIELDS = ["tolerations", "nodeSelector", "affinity"]


def _kubeflow(kind: str, replicas: str) -> dict[str, Any]:
    return {"kind": kind, "apiGroup": "kubeflow.org", "resource": kind.lower() + "s",
            "podSpecPaths": [f"spec.{replicas}.*.template.spec"]}


def _argo(kind: str, templates: str) -> dict[str, Any]:
    # Argo Workflows: each template is its own pod (container, script or containerSet, with
    # init containers and sidecars); a template takes nodeSelector, tolerations, affinity and
    # priorityClassName, not runtimeClassName.
    return {"kind": kind, "apiGroup": "argoproj.io", "resource": kind.lower() + "s",
            "podSpecPaths": [templates], "containerPaths": _ARGO_CONTAINERS,
            "podFields": _ARGO_FIELDS}


BUNDLED: list[dict[str, Any]] = [
    {"kind": "Pod", "apiGroup": "", "resource": "pods", "podSpecPaths": ["spec"]},
    {"kind": "PodTemplate", "apiGroup": "", "resource": "podtemplates",
     "podSpecPaths": ["template.spec"]},
    {"kind": "ReplicationController", "apiGroup": "", "resource": "replicationcontrollers",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "Deployment", "apiGroup": "apps", "resource": "deployments",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "ReplicaSet", "apiGroup": "apps", "resource": "replicasets",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "StatefulSet", "apiGroup": "apps", "resource": "statefulsets",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "DaemonSet", "apiGroup": "apps", "resource": "daemonsets",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "Job", "apiGroup": "batch", "resource": "jobs",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "CronJob", "apiGroup": "batch", "resource": "cronjobs",
     "podSpecPaths": ["spec.jobTemplate.spec.template.spec"]},
    _kubeflow("PyTorchJob", "pytorchReplicaSpecs"),
    _kubeflow("TFJob", "tfReplicaSpecs"),
    _kubeflow("MPIJob", "mpiReplicaSpecs"),
    _kubeflow("XGBoostJob", "xgbReplicaSpecs"),
    _kubeflow("PaddleJob", "paddleReplicaSpecs"),
    _kubeflow("JAXJob", "jaxReplicaSpecs"),
    {"kind": "Notebook", "apiGroup": "kubeflow.org", "resource": "notebooks",
     "podSpecPaths": ["spec.template.spec"]},
    # Kubeflow Trainer v2: the runtime (ClusterTrainingRuntime) holds the pod template; the
    # TrainJob says what the `trainer` container needs per node, and patches the runtime's
    # pods through `runtimePatches` (v2.2 on; it replaced podTemplateOverrides), one entry per
    # manager: ours patches the trainer nodes' pods (replicated job `node`) with tolerations,
    # nodeSelector and affinity (what a PodSpecPatch takes of what we inject).
    {"kind": "TrainJob", "apiGroup": "trainer.kubeflow.org", "resource": "trainjobs",
     "podSpecPaths": ["spec.trainer"],
     "containerPaths": [{"path": ".", "resourcesField": "resourcesPerNode"}],
     "podFields": ["tolerations", "nodeSelector", "affinity"],
     "podFieldsPath": "spec.runtimePatches[manager=gpupolicy.io/webhook].trainingRuntimeSpec"
                      ".template.spec.replicatedJobs[name=node].template.spec.template.spec"},
    {"kind": "RayCluster", "apiGroup": "ray.io", "resource": "rayclusters",
     "podSpecPaths": ["spec.headGroupSpec.template.spec", "spec.workerGroupSpecs[].template.spec"]},
    {"kind": "RayJob", "apiGroup": "ray.io", "resource": "rayjobs",
     "podSpecPaths": ["spec.rayClusterSpec.headGroupSpec.template.spec",
                      "spec.rayClusterSpec.workerGroupSpecs[].template.spec",
                      "spec.submitterPodTemplate.spec"]},
    {"kind": "RayService", "apiGroup": "ray.io", "resource": "rayservices",
     "podSpecPaths": ["spec.rayClusterConfig.headGroupSpec.template.spec",
                      "spec.rayClusterConfig.workerGroupSpecs[].template.spec"]},
    {"kind": "RayCronJob", "apiGroup": "ray.io", "resource": "raycronjobs",
     "podSpecPaths": ["spec.jobTemplate.rayClusterSpec.headGroupSpec.template.spec",
                      "spec.jobTemplate.rayClusterSpec.workerGroupSpecs[].template.spec",
                      "spec.jobTemplate.submitterPodTemplate.spec"]},
    {"kind": "JobSet", "apiGroup": "jobset.x-k8s.io", "resource": "jobsets",
     "podSpecPaths": ["spec.replicatedJobs[].template.spec.template.spec"]},
    {"kind": "LeaderWorkerSet", "apiGroup": "leaderworkerset.x-k8s.io",
     "resource": "leaderworkersets",
     "podSpecPaths": ["spec.leaderWorkerTemplate.leaderTemplate.spec",
                      "spec.leaderWorkerTemplate.workerTemplate.spec"]},
    {"kind": "Job", "apiGroup": "batch.volcano.sh", "resource": "jobs",
     "podSpecPaths": ["spec.tasks[].template.spec"]},
    {"kind": "JobTemplate", "apiGroup": "flow.volcano.sh", "resource": "jobtemplates",
     "podSpecPaths": ["spec.tasks[].template.spec"]},
    {"kind": "Rollout", "apiGroup": "argoproj.io", "resource": "rollouts",
     "podSpecPaths": ["spec.template.spec"]},
    _argo("Workflow", "spec.templates[]"),
    _argo("WorkflowTemplate", "spec.templates[]"),
    _argo("ClusterWorkflowTemplate", "spec.templates[]"),
    _argo("CronWorkflow", "spec.workflowSpec.templates[]"),
    # KServe v1beta1: every component is a pod spec inline; the predictor's container may
    # instead be `model` (or a framework field: a container with a model format), the
    # explainer's `art`; `workerSpec` is the multi-node predictor's worker pod.
    {"kind": "InferenceService", "apiGroup": "serving.kserve.io",
     "resource": "inferenceservices",
     "podSpecPaths": ["spec.predictor", "spec.predictor.workerSpec", "spec.transformer",
                      "spec.explainer"],
     "containerPaths": ["model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx",
                        "huggingface", "pmml", "lightgbm", "paddle", "art"]},
    # KServe LLMInferenceService (v1alpha1/v1alpha2): the decode pods' template and worker,
    # and the same for the prefill pods.
    {"kind": "LLMInferenceService", "apiGroup": "serving.kserve.io",
     "resource": "llminferenceservices",
     "podSpecPaths": ["spec.template", "spec.worker", "spec.prefill.template",
                      "spec.prefill.worker"]},
    # A serving runtime: the pod spec the InferenceServices that use it start from. (The
    # cluster-scoped ClusterServingRuntime is left out: no namespace's policies govern it.)
    {"kind": "ServingRuntime", "apiGroup": "serving.kserve.io", "resource": "servingruntimes",
     "podSpecPaths": ["spec"], "podFields": ["tolerations", "nodeSelector", "affinity"]},
    {"kind": "Service", "apiGroup": "serving.knative.dev", "resource": "services",
     "podSpecPaths": ["spec.template.spec"]},
    {"kind": "Configuration", "apiGroup": "serving.knative.dev", "resource": "configurations",
     "podSpecPaths": ["spec.template.spec"]},
    # Spark operator: driver and executor are pod specs whose main container is the spec
    # itself, with the GPU as `gpu: {name, quantity}`.
    {"kind": "SparkApplication", "apiGroup": "sparkoperator.k8s.io",
     "resource": "sparkapplications", "podSpecPaths": ["spec.driver", "spec.executor"],
     "containerPaths": _SPARK_CONTAINERS, "podFields": _SPARK_FIELDS},
    {"kind": "ScheduledSparkApplication", "apiGroup": "sparkoperator.k8s.io",
     "resource": "scheduledsparkapplications",
     "podSpecPaths": ["spec.template.driver", "spec.template.executor"],
     "containerPaths": _SPARK_CONTAINERS, "podFields": _SPARK_FIELDS},
    # NVIDIA NIM operator: the NIMService spec is both the pod (tolerations, nodeSelector,
    # affinity, runtimeClassName) and its one container (resources, env).
    {"kind": "NIMService", "apiGroup": "apps.nvidia.com", "resource": "nimservices",
     "podSpecPaths": ["spec"], "containerPaths": ["."],
     "podFields": ["tolerations", "nodeSelector", "affinity", "runtimeClassName"]},
]
