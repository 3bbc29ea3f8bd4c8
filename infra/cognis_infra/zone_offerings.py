"""Which Availability Zones offer the instance types the stack asks for.

Not every zone offers every instance type (in us-east-1 some zone ids lack many current types), and
ElastiCache, OpenSearch and Aurora refuse to place a node in a subnet of a zone without its type.
The zones are therefore chosen among those that offer all of them (``context.choose_zones``):

* Aurora: ``aws.rds.get_orderable_db_instance`` lists the zones where the engine orders the instance
  class (``db.serverless``), as RDS's DescribeOrderableDBInstanceOptions does;
* ElastiCache and OpenSearch: the provider has no per-zone look-up for their node types, so the zones
  offering the EC2 instance type of the same name (``cache.t4g.medium`` -> ``t4g.medium``,
  ``r6g.large.search`` -> ``r6g.large``) stand in for them (``aws.ec2.get_instance_type_offerings``
  by zone id). That the services follow EC2's offerings is an assumption (docs/deploy.md, fact 66);
  a type EC2 offers in no zone of the Region (a service-only type) is not checked at all;
* Fargate and the SageMaker reranker: no look-up exists; they are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

AURORA_ENGINE = "aurora-postgresql"


@dataclass(frozen=True)
class ZoneNeeds:
    """The instance types the stack places in its zones."""

    #: ElastiCache node types and OpenSearch instance types, as configured.
    service_types: tuple[str, ...] = ()
    #: The Aurora instance class (None: no Aurora check) and the configured engine version.
    aurora_instance_class: str | None = None
    aurora_engine_version: str = ""


def ec2_equivalent(instance_type: str) -> str:
    """The EC2 instance type behind an ElastiCache or OpenSearch type (``cache.`` / ``.search`` removed)."""
    return instance_type.removeprefix("cache.").removesuffix(".search")


def _ec2_zone_ids(instance_type: str) -> set[str]:
    found = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone-id",
        filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[instance_type])],
    )
    return set(found.locations or [])


def _aurora_zone_names(instance_class: str, engine_version: str) -> set[str]:
    # A full version ("17.5") is asked for as such; a major line ("17") takes the latest orderable version.
    exact = engine_version if "." in engine_version else None
    found = aws.rds.get_orderable_db_instance(
        engine=AURORA_ENGINE, instance_class=instance_class, engine_version=exact, engine_latest_version=exact is None
    )
    return set(found.availability_zones or [])


def lacking_types(needs: ZoneNeeds, names_by_id: Mapping[str, str]) -> dict[str, list[str]]:
    """Zone id -> the configured types that zone does not offer (zones offering everything are absent)."""
    lacking: dict[str, list[str]] = {}
    for configured in dict.fromkeys(needs.service_types):
        ec2_type = ec2_equivalent(configured)
        offered = _ec2_zone_ids(ec2_type)
        if not offered:  # EC2 offers it nowhere here: a service-only type, nothing to compare with
            pulumi.log.warn(f"cannot check which zones offer {configured}: EC2 offers no {ec2_type} in this Region")
            continue
        for zone_id in names_by_id:
            if zone_id not in offered:
                lacking.setdefault(zone_id, []).append(configured)
    if needs.aurora_instance_class:
        offered_names = _aurora_zone_names(needs.aurora_instance_class, needs.aurora_engine_version)
        for zone_id, name in names_by_id.items():
            if name not in offered_names:
                lacking.setdefault(zone_id, []).append(needs.aurora_instance_class)
    return lacking


def needs_for(
    cache_node_type: str, search_types: Sequence[str | None], aurora_instance_class: str, aurora_engine_version: str
) -> ZoneNeeds:
    """The needs of a stack: its cache node type, its OpenSearch data and master types, its Aurora class."""
    types = (cache_node_type, *(t for t in search_types if t))
    return ZoneNeeds(tuple(types), aurora_instance_class, aurora_engine_version)
