"""GPUPolicies as the API server's own admission policies (`gpupolicy export`).

The rules that look only at the object and its namespace become ValidatingAdmissionPolicies
(checks.py), the injections MutatingAdmissionPolicies with JSON patches (mutations.py), the
pod specs of every workload kind are found by cel_parts.py, and build.py puts each policy's
objects together, checking every expression's estimated cost, and says what stays with the
webhook and why. A pure translation: text in, dicts out.
"""
