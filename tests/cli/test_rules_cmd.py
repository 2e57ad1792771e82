"""`gpupolicy rules [ID]`: the reference read from the rule registry."""

from __future__ import annotations

import io
import json

import pytest

from policies.rules import OTHER_RULE_IDS, RULES, gpu_no_matching_hardware, privileged_gpu_container
from webhook import cli


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli.run(["rules", *argv], out, err), out.getvalue(), err.getvalue()


def test_json_lists_every_rule_with_its_facts() -> None:
    code, out, _ = _run("-o", "json")
    assert code == 0
    listed = {r["id"]: r for r in json.loads(out)}
    assert set(listed) == {*RULES, *OTHER_RULE_IDS}
    assert listed["cuda-driver-too-old"]["severity"] == "error (fact)"
    assert listed["gpu-node-without-gpu-request"]["severity"] == "warning"
    assert listed["gpu-qos-not-guaranteed"]["severity"] == "error"
    assert listed["shared-gpu-over-limit"]["door"] == "audit"
    assert {e["result"] for e in listed["cuda-driver-too-old"]["examples"]} == {"PASS", "FAIL"}


def test_describe_shows_the_pass_and_fail_examples() -> None:
    code, out, _ = _run("cuda-driver-too-old")
    assert code == 0
    assert out.startswith("cuda-driver-too-old  (error (fact); category compatibility; door all)")
    assert "\nFAIL: a CUDA 12.2 image where the GPU nodes run driver 470" in out
    assert "\nPASS: a CUDA 11.4 image on driver 470" in out
    assert "        image: nvidia/cuda:12.2.0-base-ubuntu22.04" in out


def test_native_is_shown_when_rules_say_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(privileged_gpu_container, "NATIVE", "", raising=False)
    monkeypatch.setattr(gpu_no_matching_hardware, "NATIVE", "needs the node inventory",
                        raising=False)
    code, out, _ = _run()
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert code == 0 and "VAP" in rows["ID"]
    assert "  native  " in rows["privileged-gpu-container"]
    assert "  webhook  " in rows["gpu-no-matching-hardware"]
    code, out, _ = _run("gpu-no-matching-hardware")
    assert code == 0
    assert "stays in the webhook: needs the node inventory" in out
