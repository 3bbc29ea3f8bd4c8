"""A SageMaker endpoint whose updates keep the running instance count.

``UpdateEndpoint`` takes the variant properties (instance count, weight) from the new endpoint
configuration unless it is called with ``RetainAllVariantProperties=true``; the configuration's
count is the *initial* one (autoscaling's minimum), so every model or image change would drop a
scaled-out reranker back to its minimum. The AWS provider's ``aws.sagemaker.Endpoint`` does not
expose the flag, so this dynamic resource (boto3, the deployer's credentials) owns the endpoint:

* create: ``CreateEndpoint`` (or, when an endpoint of that name already exists, e.g. one created by
  an earlier version of the stack, adopt it and update it as below), then wait for ``InService``;
* a new endpoint configuration: ``UpdateEndpoint`` with ``RetainAllVariantProperties=true``, then
  wait for ``InService``;
* a new name (the instance type is part of it): a new endpoint next to the old one, which is
  deleted afterwards (``DeleteEndpoint``, waited for).
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
import pulumi.dynamic

#: What ``UpdateEndpoint`` is called with besides the names (the point of this module).
UPDATE_FLAGS: dict[str, Any] = {"RetainAllVariantProperties": True}


class EndpointFailed(RuntimeError):
    pass


def sagemaker_client(region: str, profile: str | None = None) -> Any:
    import boto3

    session = boto3.Session(profile_name=profile, region_name=region) if profile else boto3.Session(region_name=region)
    return session.client("sagemaker")


def _describe(sm: Any, name: str) -> dict[str, Any] | None:
    try:
        return sm.describe_endpoint(EndpointName=name)
    except Exception as exc:  # botocore ClientError; "Could not find endpoint" is a ValidationException
        if "Could not find" in str(exc) or "ResourceNotFound" in str(exc):
            return None
        raise


def _wait(sm: Any, name: str, *, poll_s: float, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = _describe(sm, name)
        status = (found or {}).get("EndpointStatus")
        if status == "InService":
            return found  # type: ignore[return-value]
        if status in ("Failed", "OutOfService") or found is None:
            raise EndpointFailed(f"endpoint {name} is {status}: {(found or {}).get('FailureReason', 'not found')}")
        if time.monotonic() > deadline:
            raise EndpointFailed(f"endpoint {name} not InService within {timeout_s:g} s (status {status})")
        time.sleep(poll_s)


def apply_endpoint(
    props: dict[str, Any], *, client: Any = None, poll_s: float = 15.0, timeout_s: float = 3600.0
) -> dict[str, Any]:
    """Create the endpoint or move it to ``endpointConfigName`` keeping its variant properties; wait until
    it is InService; ``{arn, endpointConfigName}`` as it runs."""
    sm = client or sagemaker_client(props["region"], props.get("profile"))
    name, config = props["name"], props["endpointConfigName"]
    current = _describe(sm, name)
    if current is None:
        tags = [{"Key": k, "Value": v} for k, v in sorted((props.get("tags") or {}).items())]
        sm.create_endpoint(EndpointName=name, EndpointConfigName=config, Tags=tags)
    else:
        if current.get("EndpointStatus") != "InService":
            current = _wait(sm, name, poll_s=poll_s, timeout_s=timeout_s)
        if current.get("EndpointConfigName") != config:
            sm.update_endpoint(EndpointName=name, EndpointConfigName=config, **UPDATE_FLAGS)
    done = _wait(sm, name, poll_s=poll_s, timeout_s=timeout_s)
    return {"arn": done["EndpointArn"], "endpointConfigName": done["EndpointConfigName"]}


def delete_endpoint(props: dict[str, Any], *, client: Any = None, poll_s: float = 15.0, timeout_s: float = 1800.0):
    sm = client or sagemaker_client(props["region"], props.get("profile"))
    if _describe(sm, props["name"]) is None:
        return
    sm.delete_endpoint(EndpointName=props["name"])
    deadline = time.monotonic() + timeout_s
    while _describe(sm, props["name"]) is not None:
        if time.monotonic() > deadline:
            raise EndpointFailed(f"endpoint {props['name']} still exists after {timeout_s:g} s")
        time.sleep(poll_s)


class SageMakerEndpointProvider(pulumi.dynamic.ResourceProvider):
    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(id_=props["name"], outs={**props, **apply_endpoint(props)})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        replaces = [k for k in ("name", "region") if olds.get(k) != news.get(k)]
        changed = replaces or olds.get("endpointConfigName") != news.get("endpointConfigName")
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs={**news, **apply_endpoint(news)})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        delete_endpoint(props)


class SageMakerEndpoint(pulumi.dynamic.Resource):
    """A SageMaker real-time endpoint updated with ``RetainAllVariantProperties`` (module docstring)."""

    arn: pulumi.Output[str]
    name: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        name: str,
        endpoint_config_name: pulumi.Input[str],
        region: str,
        profile: str | None = None,
        tags: dict[str, str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            SageMakerEndpointProvider(),
            resource_name,
            {
                "name": name,
                "endpointConfigName": endpoint_config_name,
                "region": region,
                "profile": profile,
                "tags": dict(tags or {}),
                "retainAllVariantProperties": UPDATE_FLAGS["RetainAllVariantProperties"],
                "arn": None,
            },
            opts,
        )
