"""What GitHub code scanning checks of an uploaded SARIF log before it takes any of it (the
SARIF multitool's GitHub rule set, GH1001-GH1007, in our words), plus the 2.1.0 schema. One
result that fails a rule makes GitHub reject the whole upload, so every SARIF a test produces
goes through `problems`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import jsonschema

SCHEMA = Path(__file__).parent / "sarif-schema-2.1.0.json"
# GitHub's documented upload limits
MAX_RUNS, MAX_RESULTS, MAX_RULES, MAX_LOCATIONS, MAX_TAGS = 20, 25_000, 25_000, 1_000, 20


def problems(log: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    found = [f"schema: {e.message}" for e in
             jsonschema.validators.validator_for(schema)(schema).iter_errors(log)]
    runs = log.get("runs") or []
    if len(runs) > MAX_RUNS:
        found.append(f"GH1004: {len(runs)} runs (at most {MAX_RUNS})")
    for r, run in enumerate(runs):
        rules = run.get("tool", {}).get("driver", {}).get("rules") or []
        if len(rules) > MAX_RULES:
            found.append(f"GH1004: run {r}: {len(rules)} rules")
        for rule in rules:
            tags = rule.get("properties", {}).get("tags") or []
            if len(tags) > MAX_TAGS:
                found.append(f"GH1004: rule {rule.get('id')}: {len(tags)} tags")
        results = run.get("results") or []
        if len(results) > MAX_RESULTS:
            found.append(f"GH1004: run {r}: {len(results)} results")
        for i, result in enumerate(results):
            found += [f"run {r} result {i} ({result.get('ruleId')}): {p}"
                      for p in _result(result, rules)]
    return found


def _result(result: dict[str, Any], rules: list[dict[str, Any]]) -> list[str]:
    out = []
    if not (result.get("message") or {}).get("text"):
        out.append("GH1007: message has no text")
    index = result.get("ruleIndex")
    if index is not None and (index >= len(rules) or rules[index]["id"] != result.get("ruleId")):
        out.append(f"ruleIndex {index} does not name rule {result.get('ruleId')}")
    locations = result.get("locations") or []
    if not locations:
        out.append("GH1001: no locations")
    if len(locations) > MAX_LOCATIONS:
        out.append(f"GH1004: {len(locations)} locations")
    for location in locations:
        physical = location.get("physicalLocation")
        uri = ((physical or {}).get("artifactLocation") or {}).get("uri")
        if not uri:
            out.append("GH1001: a location without physicalLocation.artifactLocation.uri")
            continue
        scheme = urlparse(uri).scheme
        if scheme not in ("", "file"):
            out.append(f"GH1005: {uri}: neither relative nor a file: URI")
        start = ((physical or {}).get("region") or {}).get("startLine")
        if not isinstance(start, int) or start < 1:
            out.append("GH1003: a location without region.startLine")
    return out
