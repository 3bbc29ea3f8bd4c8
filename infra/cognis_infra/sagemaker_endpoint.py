"""A SageMaker endpoint whose updates keep the running instance count.

``UpdateEndpoint`` takes the variant properties (instance count, weight) from the new endpoint
configuration unless it is called with ``RetainAllVariantProperties=true``; the configuration's
count is the *initial* one (autoscaling's minimum), so every model or image change would drop a
scaled-out reranker back to its minimum. The AWS provider's ``aws.sagemaker.Endpoint`` does not
expose the flag, so this dynamic resource (boto3 acting as the stack's AWS provider identity,
``aws_session.py``) owns the endpoint:

* create: ``CreateEndpoint`` (or, when an endpoint of that name already exists, e.g. one created by
  an earlier version of the stack, adopt it and update it as below), then wait for ``InService``;
* a new endpoint configuration: ``UpdateEndpoint`` with ``RetainAllVariantProperties=true``, then
  wait for ``InService``;
* a new name (the instance type is part of it): a new endpoint next to the old one, which is
  deleted afterwards (``DeleteEndpoint``, waited for).

A failed update does not leave the endpoint ``Failed``: SageMaker rolls it back and it is
``InService`` again on the *old* configuration, with a ``FailureReason``. So the wait ends with a
check that the endpoint runs the configuration asked for and reports no failure; otherwise the
update raises (naming the reason) and Pulumi records it as failed.

The endpoint also owns the clean-up of the configurations and models it ran on: they are created by
the program with ``retain_on_delete`` (reranker.py), because AWS says not to delete a configuration a
live endpoint uses, and Pulumi deletes a replaced configuration on its own schedule (at the end of
the update, or at the start of the next one after a failure), which is not "when the endpoint has
left it". The endpoint deletes the configuration it moved away from, and that configuration's models
the new one does not use, only after an update that succeeded, and its own configuration and models
after the endpoint itself is gone.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import pulumi
import pulumi.dynamic

from .aws_session import AwsIdentity, client_for

#: What ``UpdateEndpoint`` is called with besides the names (the point of this module).
UPDATE_FLAGS: dict[str, Any] = {"RetainAllVariantProperties": True}


class EndpointFailed(RuntimeError):
    """The endpoint did not reach ``InService`` on the configuration asked for."""


def _not_found(exc: Exception) -> bool:
    # botocore ClientError; "Could not find endpoint/endpoint configuration/model" is a ValidationException
    return "Could not find" in str(exc) or "ResourceNotFound" in str(exc)


def _describe(sm: Any, name: str) -> dict[str, Any] | None:
    try:
        return sm.describe_endpoint(EndpointName=name)
    except Exception as exc:
        if _not_found(exc):
            return None
        raise


def _wait(sm: Any, name: str, *, poll_s: float, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = _describe(sm, name)
        status = (found or {}).get("EndpointStatus")
        if status == "InService":
            return found  # type: ignore[return-value]
        if status in ("Failed", "OutOfService", "UpdateRollbackFailed") or found is None:
            raise EndpointFailed(f"endpoint {name} is {status}: {(found or {}).get('FailureReason', 'not found')}")
        if time.monotonic() > deadline:
            raise EndpointFailed(f"endpoint {name} not InService within {timeout_s:g} s (status {status})")
        time.sleep(poll_s)


def check_runs(described: dict[str, Any], config: str, *, updated: bool) -> None:
    """Raise unless the endpoint runs ``config`` and, when this call updated it, reports no failure (a
    rolled-back update is ``InService`` on the old configuration with a ``FailureReason``). The reason
    stays until the next update, so an endpoint left on ``config`` by an earlier failed update toward
    another configuration (the change was reverted) is not a failure."""
    running, reason = described.get("EndpointConfigName"), described.get("FailureReason")
    if running != config or (updated and reason):
        raise EndpointFailed(
            f"endpoint {described.get('EndpointName')} did not move to {config}: "
            f"{reason or 'no FailureReason given'}; it is {described.get('EndpointStatus')} on {running}, "
            f"which (and its model) is kept; fix the cause and run `pulumi up` again"
        )


def _models_of(sm: Any, config: str) -> set[str]:
    try:
        found = sm.describe_endpoint_config(EndpointConfigName=config)
    except Exception as exc:
        if _not_found(exc):
            return set()
        raise
    return {v["ModelName"] for v in found.get("ProductionVariants", []) if v.get("ModelName")}


def _models_in_use(sm: Any, *, besides: str) -> set[str]:
    """Models of the configurations the Region's other endpoints run on (a replacement endpoint may run
    the same model under a new configuration)."""
    names = [
        e["EndpointName"]
        for page in sm.get_paginator("list_endpoints").paginate()
        for e in page.get("Endpoints", [])
        if e["EndpointName"] != besides
    ]
    configs = {(_describe(sm, n) or {}).get("EndpointConfigName") for n in names}
    return set().union(*(_models_of(sm, c) for c in configs if c))


def retire_config(sm: Any, config: str, *, keep_models: Collection[str] = ()) -> None:
    """Delete an endpoint configuration no endpoint runs on any more, and its models not in ``keep_models``."""
    for model in sorted(_models_of(sm, config) - set(keep_models)):
        _delete_quietly(sm.delete_model, ModelName=model)
    _delete_quietly(sm.delete_endpoint_config, EndpointConfigName=config)


def _delete_quietly(call: Any, **kwargs: str) -> None:
    try:
        call(**kwargs)
    except Exception as exc:
        if not _not_found(exc):
            raise


def apply_endpoint(
    props: dict[str, Any],
    *,
    client: Any = None,
    identity: AwsIdentity | None = None,
    poll_s: float = 15.0,
    timeout_s: float = 3600.0,
) -> dict[str, Any]:
    """Create the endpoint or move it to ``endpointConfigName`` keeping its variant properties; wait until
    it is InService on that configuration (else :class:`EndpointFailed`); then retire the configuration
    it left. ``{arn, endpointConfigName}`` as it runs."""
    sm = client or client_for("sagemaker", identity or AwsIdentity(), props["region"])
    name, config = props["name"], props["endpointConfigName"]
    current = _describe(sm, name)
    previous = None
    if current is None:
        tags = [{"Key": k, "Value": v} for k, v in sorted((props.get("tags") or {}).items())]
        sm.create_endpoint(EndpointName=name, EndpointConfigName=config, Tags=tags)
    else:
        if current.get("EndpointStatus") != "InService":
            current = _wait(sm, name, poll_s=poll_s, timeout_s=timeout_s)
        if current.get("EndpointConfigName") != config:
            previous = current.get("EndpointConfigName")
            sm.update_endpoint(EndpointName=name, EndpointConfigName=config, **UPDATE_FLAGS)
    done = _wait(sm, name, poll_s=poll_s, timeout_s=timeout_s)
    check_runs(done, config, updated=previous is not None)
    if previous:
        retire_config(sm, previous, keep_models=_models_of(sm, config))
    return {"arn": done["EndpointArn"], "endpointConfigName": done["EndpointConfigName"]}


def delete_endpoint(
    props: dict[str, Any],
    *,
    client: Any = None,
    identity: AwsIdentity | None = None,
    poll_s: float = 15.0,
    timeout_s: float = 1800.0,
) -> None:
    """Delete the endpoint (waited for), then the configuration it ran on and that configuration's models."""
    sm = client or client_for("sagemaker", identity or AwsIdentity(), props["region"])
    found = _describe(sm, props["name"])
    if found is not None:
        sm.delete_endpoint(EndpointName=props["name"])
        deadline = time.monotonic() + timeout_s
        while _describe(sm, props["name"]) is not None:
            if time.monotonic() > deadline:
                raise EndpointFailed(f"endpoint {props['name']} still exists after {timeout_s:g} s")
            time.sleep(poll_s)
    configs = dict.fromkeys(c for c in ((found or {}).get("EndpointConfigName"), props.get("endpointConfigName")) if c)
    if configs:
        in_use = _models_in_use(sm, besides=props["name"])
        for config in configs:
            retire_config(sm, config, keep_models=in_use)


class SageMakerEndpointProvider(pulumi.dynamic.ResourceProvider):
    #: The stack's AWS provider identity, read in :meth:`configure` (aws_session.py).
    identity: AwsIdentity = AwsIdentity()

    def configure(self, req: pulumi.dynamic.ConfigureRequest) -> None:
        self.identity = AwsIdentity.from_config(req.config)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(
            id_=props["name"], outs={**props, **apply_endpoint(props, identity=self.identity)}
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        replaces = [k for k in ("name", "region") if olds.get(k) != news.get(k)]
        changed = replaces or olds.get("endpointConfigName") != news.get("endpointConfigName")
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs={**news, **apply_endpoint(news, identity=self.identity)})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        delete_endpoint(props, identity=self.identity)


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
                "tags": dict(tags or {}),
                "retainAllVariantProperties": UPDATE_FLAGS["RetainAllVariantProperties"],
                "arn": None,
            },
            opts,
        )
