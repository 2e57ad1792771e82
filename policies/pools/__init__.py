"""The nodes and pools of a GPU cluster as the operator decides about them
(reference/operator-guide.md §1 "the four indicators", §3 "where they come from").

- `nodes`: what a Node object says of its GPUs, versions, taints and reservation.
- `thresholds`: the minimums and thresholds the node facts and the advice use, with their
  documented defaults; users override them with a `GPUPoolThresholds` file.
- `failures`: why a failing GPU pod fails, one cause each.
- `view`: the pool view, fed pod by pod (bounded memory) and read once at the end.
- `utilization`: per-GPU utilisation samples (from DCGM through Prometheus) per pool.
- `advice`: share / dedicate / isolate / automate / grow, each with the numbers behind it.

All of it is pure: the audit (webhook/commands/audit.py) reads the cluster and Prometheus and
hands the objects and samples in.
"""
