"""Dynamic Resource Allocation (resource.k8s.io/v1): parsing, pools, CEL and allocation.

Pure like the rest of policies/: the edges hand in plain dicts, this package hands back typed
objects, per-node-group verdicts and problems (field path + message), never an exception.

- parse_slices.parse_slice / parse_device_class, parse_claims.parse_claim: dict -> typed value
  with `.problems` (malformed fields);
- pools.DraInventory.build(slices, classes, nodes): the devices each node sees (newest complete
  generation per pool), nodes with identical devices grouped;
- allocate.check(claims, inventory): per node group, can it take every request of every claim
  at once, with reasons; claims.py: search-free facts (selectors that do not compile, unknown
  classes, GPU/MIG demand by what class and request selectors match); extended.py: extended
  resources served through DRA, served.py: the GPU demand of those names;
- taint_rules.py: DeviceTaintRules, merged into the devices they pick;
- cel.compile_selector / evaluate: CEL with the Kubernetes functions DRA selectors use.
"""
