"""Dynamic Resource Allocation (resource.k8s.io/v1): parsing, pools, CEL and allocation.

Pure like the rest of policies/: the edges hand in plain dicts, this package hands back typed
objects, per-node-group verdicts and problems (field path + message), never an exception.
"""
