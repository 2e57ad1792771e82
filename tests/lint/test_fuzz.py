"""Nothing crashes on any input: mutated manifests through the reader, the engine and --fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policies import yamlpos
from policies.context import Context
from tests.lint.helpers import MANIFESTS, POLICIES
from tests.lint.test_yamlpos import _mutations
from webhook.commands import lint
from webhook.inputs import sources
from webhook.output.fix import FixError, fix_text

SEEDS = [p.read_bytes() for p in sorted(MANIFESTS.rglob("*.y*ml"))]


@pytest.fixture(scope="module")
def context() -> Context:
    return Context(policies=sources.load_policies(POLICIES), catalog=sources.load_catalog())


@pytest.mark.parametrize("seed", range(3))
def test_lint_and_fix_survive_mutated_manifests(seed: int, context: Context) -> None:
    fixed = 0
    for data in _mutations(100 + seed, SEEDS, 700):
        result = lint.Result()
        lint.lint_stream("x.yaml", yamlpos.read_stream(data), context, result,
                         show_mutations=True)
        assert not [f for f in result.findings if f.rule == lint.ENGINE_ERROR], data
        for finding in result.findings:
            assert finding.line is not None and finding.line >= 1
        if "x.yaml" not in result.edits:
            continue
        try:
            text = fix_text(data.decode("utf-8"), result.edits["x.yaml"])
        except FixError:
            continue
        yaml.safe_load_all(text)  # what --fix writes always parses
        fixed += 1
    assert fixed > 0


def test_a_bad_document_is_reported_and_kept_while_its_neighbour_is_fixed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml-train}\n"
                    "spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
                    "---\nb: !!python/name:os.system x\n")
    from tests.lint.helpers import gpupolicy

    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix", str(path))
    assert run.code == 1
    assert "yaml-syntax" in run.out
    text = path.read_text()
    assert text.endswith("---\nb: !!python/name:os.system x\n")
    assert "runtimeClassName: nvidia" in text
