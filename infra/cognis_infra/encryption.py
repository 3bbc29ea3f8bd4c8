"""Encryption: the stack's customer-managed KMS key.

Used where an AWS-managed key does not work or is not the default:

* CloudWatch log groups (application logs, OpenSearch slow logs, Redis slow logs, VPC
  flow logs) - the key policy lets the CloudWatch Logs service use it, scoped by the
  log-group encryption context to this account and region;
* the SNS alarm topic - CloudWatch alarms cannot publish to a topic encrypted with the
  AWS-managed ``aws/sns`` key, so the key policy lets ``cloudwatch.amazonaws.com`` use it.

Data stores use their service keys (``aws/es``, ``aws/rds``, ``aws/elasticache``,
``aws/secretsmanager``): encrypted at rest without key-policy plumbing.

The key is protected (``cognis:protect``) and retained on delete: ``pulumi destroy`` leaves it
in the account, so log groups it encrypted stay readable; scheduling its deletion (7 to 30 days
of waiting) is a deliberate step of the teardown procedure in docs/deploy.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext


@dataclass
class EncryptionArgs:
    context: AwsContext
    alias: str
    deletion_window_days: int = 30
    #: ``protect`` on the key (switch off only to tear the stack down).
    protect: bool = True
    tags: Mapping[str, str] = field(default_factory=dict)


def key_policy(ctx: AwsContext) -> dict:
    """The key policy: account administrators, CloudWatch Logs and CloudWatch alarms."""
    root = f"arn:{ctx.partition}:iam::{ctx.account_id}:root"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                # Required so IAM policies in the account can grant use of the key; in a key
                # policy "Resource": "*" means "this key".
                "Sid": "AccountAdministration",
                "Effect": "Allow",
                "Principal": {"AWS": root},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchLogs",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{ctx.region}.{ctx.dns_suffix}"},
                "Action": [
                    "kms:Encrypt",
                    "kms:Decrypt",
                    "kms:ReEncryptFrom",
                    "kms:ReEncryptTo",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:DescribeKey",
                ],
                "Resource": "*",
                "Condition": {
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": ctx.arn("logs", "log-group:*"),
                    }
                },
            },
            {
                "Sid": "CloudWatchAlarmsToSns",
                "Effect": "Allow",
                "Principal": {"Service": ctx.service_principal("cloudwatch")},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:SourceAccount": ctx.account_id}},
            },
        ],
    }


class Encryption(CognisComponent):
    """A customer-managed KMS key with yearly rotation, and its alias."""

    key_arn: pulumi.Output[str]
    key_id: pulumi.Output[str]

    def __init__(self, name: str, args: EncryptionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:encryption:Encryption", name, args.tags, opts)
        key = aws.kms.Key(
            f"{name}-key",
            description=f"cognis-memory ({args.alias}): logs and alarm notifications",
            enable_key_rotation=True,
            deletion_window_in_days=args.deletion_window_days,
            policy=pulumi.Output.json_dumps(key_policy(args.context)),
            tags=self.tags(f"{name}-key"),
            opts=self.child_opts(protect=args.protect, retain_on_delete=True),
        )
        aws.kms.Alias(f"{name}-alias", name=f"alias/{args.alias}", target_key_id=key.key_id, opts=self.child_opts())
        self.key_arn = key.arn
        self.key_id = key.key_id
        self.register_outputs({"keyArn": self.key_arn, "keyId": self.key_id})
