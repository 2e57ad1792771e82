"""Will it run: kube-scheduler's view of a pod and a node (DESIGN.md §2.6).

request: the pod's effective request (what NodeResourcesFit adds up);
fit: NodeResourcesFit's verdict on one node, in the scheduler's words and order;
occupancy: what the pods bound to each node already hold;
templates: nodes that can appear (Karpenter NodePools, cluster-autoscaler node groups).
"""
