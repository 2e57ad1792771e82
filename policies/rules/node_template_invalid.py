"""node-template-invalid: a node template (a Karpenter NodePool, a Cluster API node group with
the cluster-autoscaler's scale-from-zero annotations, a `--node-templates` Node) that cannot be
read as capacity, or a part of one: an instance type the GPU catalog does not know, a
requirement Karpenter does not read, an annotation that is no quantity. What it could start is
then not known, so no pod is judged to fit it (the pods it would run are refused as if it were
absent, or fit another template). Each finding names the object and the path. A warning.
Cluster scope: `audit`; `lint`, `review` and `explain` say the same on stderr (the template
is part of their inventory, not of what they judge).

FAIL: a NodePool whose `node.kubernetes.io/instance-type` requirement names `p9.mega` (not in
the catalog)
PASS: the same NodePool naming `g6.xlarge`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context

ID = "node-template-invalid"
INTRINSIC = False
NATIVE = "It judges the cluster's node templates, not an object being admitted (audit)."
SCOPE = "cluster"
SEVERITY = "warning"
CATEGORY = "scheduling"

_NODE_POOL = """\
  nodes:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: gpu-l4-spot}}
    spec:
      template:
        spec:
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
          requirements:
          - {{key: node.kubernetes.io/instance-type, operator: In, values: [{instance}]}}
"""
EXAMPLES = f"""
- FAIL: an instance type the GPU catalog does not know
{_NODE_POOL.format(instance="p9.mega")}
- PASS: an instance type it knows
{_NODE_POOL.format(instance="g6.xlarge")}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    inventory = context.inventory
    for problem in inventory.template_problems if inventory is not None else ():
        yield ClusterFinding(ID, problem.describe(), "")
