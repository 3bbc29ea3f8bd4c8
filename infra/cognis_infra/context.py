"""Facts about the target account and region, looked up once per deployment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi_aws as aws

from .zone_offerings import ZoneNeeds, lacking_types


@dataclass(frozen=True)
class AwsContext:
    """Region, account and partition of the deployment, plus the AZs to use (names and zone ids)."""

    region: str
    account_id: str
    partition: str
    dns_suffix: str
    availability_zones: tuple[str, ...]
    #: Zone ids of ``availability_zones``, position for position (the same physical zone in every account).
    zone_ids: tuple[str, ...] = ()
    #: ``com.amazonaws`` in the commercial partition (``cn.com.amazonaws`` in China): VPC endpoint service names.
    reverse_dns_prefix: str = "com.amazonaws"

    def arn(self, service: str, resource: str, *, region: str | None = None, account: str | None = None) -> str:
        """Build an ARN in this partition (region/account default to the stack's)."""
        region = self.region if region is None else region
        account = self.account_id if account is None else account
        return f"arn:{self.partition}:{service}:{region}:{account}:{resource}"

    def service_principal(self, service: str) -> str:
        return f"{service}.{self.dns_suffix}"

    def endpoint_service(self, service: str) -> str:
        """A VPC endpoint service name in this partition: ``com.amazonaws.<region>.<service>``."""
        return f"{self.reverse_dns_prefix}.{self.region}.{service}"


def choose_zones(
    names: Sequence[str],
    zone_ids: Sequence[str],
    az_count: int,
    wanted: Sequence[str] = (),
    lacking: Mapping[str, Sequence[str]] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(names, zone ids)`` of the AZs to use: ``wanted`` zone ids in that order, else the first
    ``az_count`` zone ids in sorted order among those that lack none of the configured instance types
    (``lacking``: zone id -> the types it does not offer, ``zone_offerings.lacking_types``). AZ *names* map
    to different physical zones in every account; zone ids do not, so the choice is the same zones
    whoever deploys."""
    by_id = dict(zip(zone_ids, names, strict=True))
    lacking = {z: list(types) for z, types in (lacking or {}).items() if types}

    def gaps(zones: Sequence[str]) -> str:
        return "; ".join(f"{z} lacks {', '.join(lacking[z])}" for z in zones if z in lacking)

    if wanted:
        unknown = [z for z in wanted if z not in by_id]
        if unknown:
            raise ValueError(
                f"cognis:availabilityZoneIds names zone ids this region does not offer: {', '.join(unknown)} "
                f"(available: {', '.join(sorted(by_id))})"
            )
        if len(wanted) != az_count:
            raise ValueError(f"cognis:availabilityZoneIds lists {len(wanted)} zones; cognis:azCount is {az_count}")
        if any(z in lacking for z in wanted):
            raise ValueError(f"cognis:availabilityZoneIds names zones without the configured types: {gaps(wanted)}")
        chosen = list(wanted)
    else:
        usable = [z for z in sorted(by_id) if z not in lacking]
        if len(usable) < az_count:
            raise ValueError(
                f"the region has {len(usable)} available AZs that offer the configured instance types "
                f"({', '.join(usable) or 'none'}; {gaps(sorted(by_id)) or 'all zones'}); cognis:azCount asks for "
                f"{az_count}: choose other instance types or a smaller cognis:azCount"
            )
        chosen = usable[:az_count]
    return tuple(by_id[z] for z in chosen), tuple(chosen)


def lookup(az_count: int, zone_ids: Sequence[str] = (), needs: ZoneNeeds | None = None) -> AwsContext:
    """Ask the provider for region, account, partition and the AZs to use.

    Only AZs that need no opt-in are used (Local Zones and Wavelength Zones are skipped), and, with
    ``needs``, only AZs that offer the configured instance types (``zone_offerings``).
    """
    found = aws.get_region()
    region = getattr(found, "region", None) or found.name  # pulumi-aws 7 / 6
    identity = aws.get_caller_identity()
    partition = aws.get_partition()
    zones = aws.get_availability_zones(
        state="available",
        filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
    )
    lacking = lacking_types(needs, dict(zip(zones.zone_ids, zones.names, strict=True))) if needs else {}
    names, ids = choose_zones(zones.names, zones.zone_ids, az_count, zone_ids, lacking)
    return AwsContext(
        region=region,
        account_id=identity.account_id,
        partition=partition.partition,
        dns_suffix=partition.dns_suffix,
        availability_zones=names,
        zone_ids=ids,
        reverse_dns_prefix=partition.reverse_dns_prefix,
    )
