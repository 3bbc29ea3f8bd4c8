"""The cognis-memory policy pack: registers every rule of cognis_policies.

The rules are plain functions in ``cognis_policies`` (tested directly over the mocked
program's resources); this file only hands them to pulumi-policy. Constructing the
``PolicyPack`` starts the analyzer server, so it happens here and nowhere else.

Pulumi runs the pack's directory as a program (``python -m pulumi.policy <engine> .`` from the
directory, or ``python <directory>``), which puts the directory first on the import path, so the
pack's own virtualenv finds ``cognis_policies`` next to this file; in the project's .venv it is
installed (distribution cognis-infra, infra/pyproject.toml). See docs/deploy.md.
"""

import cognis_policies as rules
from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

PolicyPack(
    name="cognis-memory",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        *(
            ResourceValidationPolicy(name=r.name, description=r.description, validate=rules.resource_validator(r))
            for r in rules.RESOURCE_RULES
        ),
        *(
            StackValidationPolicy(name=r.name, description=r.description, validate=rules.stack_validator(r))
            for r in rules.STACK_RULES
        ),
    ],
)
