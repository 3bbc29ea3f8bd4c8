"""The deploy guide stays true to the program: sections, stack outputs, config keys."""

from __future__ import annotations

import re

from cognis_policies import RESOURCE_RULES, STACK_RULES

from tests.infra.infra_harness import REPO

GUIDE = (REPO / "docs" / "deploy.md").read_text()


def test_guide_covers_the_deploy_journey():
    for needle in (
        "## Prerequisites",
        "pulumi stack init",
        "pulumi config set",
        "pulumi up",
        "## 4. The first API key",
        "## 6. Tear down",
        "pulumi destroy",
        "## Costs of the default sizes",
    ):
        assert needle in GUIDE, needle


def test_stack_outputs_named_in_the_guide_exist(program):
    named = set(re.findall(r"pulumi stack output (\w+)", GUIDE))
    assert named and named <= set(program.exports), named - set(program.exports)


def test_config_keys_named_in_the_guide_are_documented():
    example = (REPO / "Pulumi.example.yaml").read_text()
    keys = set(re.findall(r"cognis:(\w+)", GUIDE))
    missing = sorted(k for k in keys if f"cognis:{k}" not in example)
    assert not missing, missing


def test_every_policy_is_listed():
    for rule in (*RESOURCE_RULES, *STACK_RULES):
        assert f"`{rule.name}`" in GUIDE, rule.name
