"""`gpupolicy migrate`: what a move from the device plugin to DRA would do (DESIGN.md §3.7).

Pure like the rest of policies/: `derive` turns device-plugin nodes into the objects the NVIDIA
DRA driver would publish for them (plain dicts, read by the same inventory code as a real
cluster's), `compare` judges a workload against both inventories through `review()` and
`explain()`, and `rewrite` turns extended-resource requests into ResourceClaimTemplates.
"""
