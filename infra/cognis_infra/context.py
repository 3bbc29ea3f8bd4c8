"""Facts about the target account and region, looked up once per deployment."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_aws as aws


@dataclass(frozen=True)
class AwsContext:
    """Region, account and partition of the deployment, plus the AZs to use."""

    region: str
    account_id: str
    partition: str
    dns_suffix: str
    availability_zones: tuple[str, ...]

    def arn(self, service: str, resource: str, *, region: str | None = None, account: str | None = None) -> str:
        """Build an ARN in this partition (region/account default to the stack's)."""
        region = self.region if region is None else region
        account = self.account_id if account is None else account
        return f"arn:{self.partition}:{service}:{region}:{account}:{resource}"

    def service_principal(self, service: str) -> str:
        return f"{service}.{self.dns_suffix}"


def lookup(az_count: int) -> AwsContext:
    """Ask the provider for region, account, partition and the first ``az_count`` AZs.

    Only AZs that need no opt-in are used (Local Zones and Wavelength Zones are skipped).
    """
    found = aws.get_region()
    region = getattr(found, "region", None) or found.name  # pulumi-aws 7 / 6
    identity = aws.get_caller_identity()
    partition = aws.get_partition()
    zones = aws.get_availability_zones(
        state="available",
        filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
    )
    names = sorted(zones.names)
    if len(names) < az_count:
        raise ValueError(
            f"region {region} has {len(names)} available AZs ({', '.join(names)}); cognis:azCount asks for {az_count}"
        )
    return AwsContext(
        region=region,
        account_id=identity.account_id,
        partition=partition.partition,
        dns_suffix=partition.dns_suffix,
        availability_zones=tuple(names[:az_count]),
    )
