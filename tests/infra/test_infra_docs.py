"""The deploy guide stays true to the program: sections, stack outputs, config keys, policies,
costs, and the AWS facts it relies on (each cited or marked unconfirmed)."""

from __future__ import annotations

import re

from cognis_policies import RESOURCE_RULES, STACK_RULES

from tests.infra.infra_harness import REPO

GUIDE = (REPO / "docs" / "deploy.md").read_text()
SCHEMA = (REPO / "Pulumi.yaml").read_text()


def _section(heading: str) -> str:
    start = GUIDE.index(heading)
    nxt = GUIDE.find("\n## ", start + len(heading))
    return GUIDE[start : nxt if nxt != -1 else len(GUIDE)]


def test_guide_covers_the_deploy_journey():
    for needle in (
        "## Prerequisites",
        "## 2. Stage the reranker model",
        "scripts/stage_reranker_model.py",
        "pulumi stack init",
        "pulumi config set",
        "## 4. Deploy: one `pulumi up` from an empty account",
        "## 5. The first API key",
        "## 6. The dev profile",
        "## 8. Rotation",
        "## 9. Database access: owner and application role",
        "## 10. Health, readiness and alarms",
        "## 11. Tear down",
        "pulumi destroy",
        "## Costs",
        "## AWS facts this stack relies on",
    ):
        assert needle in GUIDE, needle


def test_stack_outputs_named_in_the_guide_exist(program):
    named = set(re.findall(r"pulumi stack output (\w+)", GUIDE))
    assert named and named <= set(program.exports), named - set(program.exports)


def test_config_keys_named_in_the_guide_are_in_the_schema_and_the_example():
    example = (REPO / "Pulumi.example.yaml").read_text()
    keys = set(re.findall(r"cognis:(\w+)", GUIDE))
    assert keys
    assert not sorted(k for k in keys if f"cognis:{k}" not in example)
    assert not sorted(k for k in keys if not re.search(rf"^\s+cognis:{k}:", SCHEMA, re.M))


def test_every_policy_is_listed():
    for rule in (*RESOURCE_RULES, *STACK_RULES):
        assert f"`{rule.name}`" in GUIDE, rule.name


def test_guide_says_what_a_preview_with_unknown_values_does():
    guardrails = _section("## Guardrails (policy pack)")
    assert "UnknownValueError" in guardrails and "ADVISORY" in guardrails
    assert "`pulumi up` is the gate" in guardrails


def test_both_cost_tables_count_public_ipv4_and_log_ingestion():
    costs = _section("## Costs")
    prod, dev = costs.split("### Dev")
    for table in (prod, dev):
        assert "Public IPv4" in table
        assert "CloudWatch Logs ingestion" in table
        assert "**Total**" in table


def test_every_aws_fact_is_cited_or_marked_unconfirmed():
    facts = _section("## AWS facts this stack relies on")
    rows = [ln for ln in facts.splitlines() if re.match(r"\| \d+ \|", ln)]
    assert len(rows) >= 20
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        fact, source = cells[1], cells[-1]
        assert "https://" in source or "Could not confirm" in fact, row
    text = " ".join(rows)
    # The facts the issue names, each present.
    for needle in (
        "pgvector 0.8",
        "instance type of a variant registered for auto scaling",
        "replaces tasks found unhealthy",
        "EnableNetworkIsolation",
        "KMS key deletion waits 7-30 days",
        "`ROTATE`",
        "AZs where the service is offered",
        "public IPv4",
        "CloudWatch Logs standard ingestion",
        # issue 22
        "modelLifecycle",
        "2026-06-19",
        "aws-marketplace:Subscribe",
        "RetainAllVariantProperties",
        "AllowMajorVersionUpgrade",
        "log_parameter_max_length",
        "rds-ca-rsa2048-g1",
    ):
        assert needle in text, needle


def test_guide_covers_the_round_3_procedures():
    """The first-use step for Bedrock models (with the CLI), the migration task, the upgrade procedure,
    the image tag and the HTTP-only dev profile."""
    for needle in (
        "## Bedrock model",
        "aws bedrock put-use-case-for-model-access",
        "aws bedrock create-foundation-model-agreement",
        "### Aurora major version upgrade",
        "cognis:auroraAllowMajorVersionUpgrade true",
        "one-off ECS task",
        "cognis-memory migrate",
        "### The image tag",
        "cognis:httpOnly",
    ):
        assert needle in GUIDE, needle
    assert "Bedrock -> Model access" not in GUIDE  # the retired console page
    assert "separate migration task with its own role" not in GUIDE  # done, no longer "not included"
