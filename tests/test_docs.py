"""The README documents what the code has: every rule id, the two set-up commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policies.loading import parse_policies
from policies.rules import OTHER_RULE_IDS, RULES
from webhook.output.report import help_uri

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("rule", [*RULES, "node-selector-conflict"])
def test_rule_in_readme_table(rule: str) -> None:
    """Each rule has a row, with the anchor its SARIF helpUri points at."""
    anchor = help_uri(rule).rsplit("#", 1)[1]
    assert re.search(rf'^\| <a id="{anchor}"></a>`{re.escape(rule)}` \|', README, re.MULTILINE)


def test_other_rule_ids_are_known() -> None:
    assert "node-selector-conflict" in OTHER_RULE_IDS


def test_policy_example_is_a_valid_policy() -> None:
    section = README.split("## Policies", 1)[1].split("\n## ", 1)[0]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    [policy] = parse_policies(example, "README.md")
    assert policy.spec.rules.require_hardware_match


def test_two_setup_commands() -> None:
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)", setup, re.MULTILINE)
    assert commands == ["make serve", "make test"]
