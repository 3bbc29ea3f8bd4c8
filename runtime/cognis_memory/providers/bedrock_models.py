"""The default Bedrock model and how Bedrock model ids are read: one file for the runtime and the stack.

Standard library only: ``infra/cognis_infra/bedrock_models.py`` is a symbolic link to this file (like
``metric_names.py``), so the Pulumi program reads the runtime's default without importing the runtime.

Default: Amazon Nova 2 Lite, Active on Bedrock, an Amazon model (no AWS Marketplace subscription and
no first-use form, unlike third-party models), offered only through cross-Region inference profiles:
``us.amazon.nova-2-lite-v1:0`` (US geography), ``eu.amazon.nova-2-lite-v1:0`` (EU geography) and
``global.amazon.nova-2-lite-v1:0`` (any commercial Region). :func:`default_model_id` picks the profile
of the Region's geography where the model has one, so the text of a US or EU stack stays in its
geography (and within an SCP that denies other Regions), and the global profile elsewhere (no APAC or
Japan profile of this model was found); set ``COGNIS_BEDROCK_MODEL_ID`` /
``cognis:bedrockModelId`` for another model or profile. docs/deploy.md ("Bedrock model") has the
sources and the reasons.
"""

from __future__ import annotations

#: The default extraction model (the foundation model behind the inference profiles below).
DEFAULT_FOUNDATION_MODEL = "amazon.nova-2-lite-v1:0"
#: Geographies of the default model's inference profiles; "global" routes to any commercial Region.
DEFAULT_MODEL_GEOGRAPHIES: tuple[str, ...] = ("us", "eu", "global")

#: Prefixes of system-defined cross-Region inference profile ids (``us.anthropic.claude-...``).
INFERENCE_PROFILE_PREFIXES: tuple[str, ...] = ("us", "eu", "apac", "us-gov", "ca", "jp", "au", "global")

#: Lifecycle states as GetFoundationModel reports them (``modelDetails.modelLifecycle.status``).
ACTIVE, LEGACY = "ACTIVE", "LEGACY"


def region_geography(region: str | None) -> str | None:
    """The inference-profile geography a Region's requests may use (``us-east-1`` -> ``us``); None if unknown."""
    if not region:
        return None
    if region.startswith("us-gov-"):
        return "us-gov"
    if region.startswith("us-"):
        return "us"
    if region.startswith("eu-"):
        return "eu"
    if region.startswith("ca-"):
        return "ca"
    if region.startswith("ap-"):
        return "apac"
    return None


def default_model_id(region: str | None) -> str:
    """The default model id for a Region: the profile of the Region's geography where the default model has
    one (``us.`` in a US Region, ``eu.`` in an EU one), else the global profile."""
    geography = region_geography(region)
    if geography not in DEFAULT_MODEL_GEOGRAPHIES:
        geography = "global"
    return f"{geography}.{DEFAULT_FOUNDATION_MODEL}"


def split_profile(model_id: str) -> tuple[str | None, str]:
    """``(geography, foundation model id)`` of a model id: ``("us", "amazon.nova-2-lite-v1:0")`` for a
    system-defined inference profile id, ``(None, model_id)`` for a foundation model id."""
    prefix, _, base = model_id.partition(".")
    if prefix in INFERENCE_PROFILE_PREFIXES and base and "." in base:
        return prefix, base
    return None, model_id


def foundation_model_id(model_id: str) -> str:
    """The foundation model behind a model id (what GetFoundationModel is asked about)."""
    return split_profile(model_id.rsplit("/", 1)[-1] if model_id.startswith("arn:") else model_id)[1]
