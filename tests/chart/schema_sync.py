"""The chart's generated parts, and a writer to refresh them after the model changes.

Two pieces of the chart are copies of what `gpupolicy schema` derives from policies/model.py:
the CRD (files/crd-gpupolicies.yaml) and the GPUPolicy definitions under `$defs` in
values.schema.json (so a typo inside `values.policies` fails `helm install`, not the server),
beside the GPUPoolThresholds spec of policies/pools/thresholds.py (audit.cronJob.thresholds);
a third is `gpupolicy export` of the bundled policies (files/native-policies.yaml, with the
release namespace left for the template to fill in). Tests compare them;
`python -m tests.chart.schema_sync` rewrites them.
"""

from __future__ import annotations

import functools
import io
import json
import sys
from pathlib import Path
from typing import Any

from webhook import cli

CHART = Path(__file__).resolve().parents[2] / "charts" / "gpupolicy"
CRD_FILE = CHART / "files" / "crd-gpupolicies.yaml"
VALUES_SCHEMA = CHART / "values.schema.json"
NATIVE_FILE = CHART / "files" / "native-policies.yaml"
RELEASE_PLACEHOLDER = "__RELEASE_NAMESPACE__"


@functools.cache
def schema_output(fmt: str) -> str:
    """`gpupolicy schema --format FMT`, run through the real CLI entry point."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["schema", "--format", fmt], out, err)
    if code != 0:
        raise RuntimeError(f"gpupolicy schema --format {fmt} exited {code}: {err.getvalue()}")
    return out.getvalue()


def native_output() -> str:
    """`gpupolicy export` of the bundled policies, as the chart ships it."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["export", "--release-namespace", RELEASE_PLACEHOLDER], out, err)
    if code != 0:
        raise RuntimeError(f"gpupolicy export exited {code}: {err.getvalue()}")
    return out.getvalue()


def policy_defs() -> dict[str, Any]:
    defs: dict[str, Any] = json.loads(schema_output("json"))["$defs"]
    return defs


THRESHOLDS = "GPUPoolThresholds"


def thresholds_defs() -> dict[str, Any]:
    """The GPUPoolThresholds spec (audit.cronJob.thresholds), from its pydantic model: its
    parts named GPUPoolThresholds<Model>, apart from the policies' own."""
    from policies.pools.thresholds import Thresholds

    schema = Thresholds.model_json_schema(by_alias=True, ref_template=THRESHOLDS + "{model}")
    schema = json.loads(json.dumps(schema).replace(f'"{THRESHOLDS}', f'"#/$defs/{THRESHOLDS}'))
    parts = {f"{THRESHOLDS}{name}": part for name, part in schema.pop("$defs").items()}
    return {**parts, f"{THRESHOLDS}Spec": schema}


def chart_defs() -> dict[str, Any]:
    """Everything under values.schema.json's `$defs`: generated, never edited by hand."""
    return {**policy_defs(), **thresholds_defs()}


def main() -> int:
    CRD_FILE.write_text(schema_output("crd"), encoding="utf-8")
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    schema["$defs"] = chart_defs()
    VALUES_SCHEMA.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    NATIVE_FILE.write_text(native_output(), encoding="utf-8")
    sys.stdout.write(f"wrote {CRD_FILE}, {NATIVE_FILE} and the $defs of {VALUES_SCHEMA}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
