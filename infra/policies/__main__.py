"""The cognis-memory policy pack: registers every rule of cognis_policies.

The rules are plain functions in ``cognis_policies`` (tested directly over the mocked
program's resources); this file only hands them to pulumi-policy. Constructing the
``PolicyPack`` starts the analyzer server, so it happens here and nowhere else.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
