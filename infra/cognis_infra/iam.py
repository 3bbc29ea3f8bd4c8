"""IAM policy documents as plain dicts (serialised with ``pulumi.Output.json_dumps``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi


def statement(
    sid: str,
    actions: Sequence[str],
    resources: Sequence[Any] | Any,
    *,
    effect: str = "Allow",
    condition: dict | None = None,
    principal: dict | None = None,
) -> dict:
    stmt: dict[str, Any] = {"Sid": sid, "Effect": effect, "Action": list(actions)}
    if principal is not None:
        stmt["Principal"] = principal
    stmt["Resource"] = list(resources) if isinstance(resources, (list, tuple)) else resources
    if condition:
        stmt["Condition"] = condition
    return stmt


def document(*statements: dict) -> pulumi.Output[str]:
    """A policy document; statements may hold Outputs (ARNs of other resources)."""
    return pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": list(statements)})


def assume_role_policy(service_principal: str, *, source_account: str | None = None) -> str:
    """Trust policy letting one AWS service assume the role (confused-deputy guarded)."""
    stmt: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": service_principal},
        "Action": "sts:AssumeRole",
    }
    if source_account:
        stmt["Condition"] = {"StringEquals": {"aws:SourceAccount": source_account}}
    return pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [stmt]})
