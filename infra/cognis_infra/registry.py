"""Registry: the ECR repository the API image is pushed to.

``scripts/build_and_push_image.sh`` builds the project's ``Dockerfile``, pushes it here
under an immutable tag and sets ``cognis:imageTag``; the service runs that tag.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent


@dataclass
class RegistryArgs:
    #: Tagged images kept; older ones expire (untagged ones after a day).
    keep_images: int = 30
    tags: Mapping[str, str] = field(default_factory=dict)


def lifecycle_policy(keep_images: int) -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": "Expire untagged images after a day",
                    "selection": {
                        "tagStatus": "untagged",
                        "countType": "sinceImagePushed",
                        "countUnit": "days",
                        "countNumber": 1,
                    },
                    "action": {"type": "expire"},
                },
                {
                    "rulePriority": 2,
                    "description": f"Keep the last {keep_images} images",
                    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep_images},
                    "action": {"type": "expire"},
                },
            ]
        }
    )


class Registry(CognisComponent):
    """An ECR repository: immutable tags, scan on push, KMS encryption, lifecycle rules."""

    repository_url: pulumi.Output[str]
    repository_arn: pulumi.Output[str]

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:registry:Registry", name, args.tags, opts)
        repo = aws.ecr.Repository(
            f"{name}-api",
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS")],
            force_delete=False,
            tags=self.tags(f"{name}-api"),
            opts=self.child_opts(),
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-api", repository=repo.name, policy=lifecycle_policy(args.keep_images), opts=self.child_opts()
        )
        self.repository_url = repo.repository_url
        self.repository_arn = repo.arn
        self.register_outputs({"repositoryUrl": self.repository_url, "repositoryArn": self.repository_arn})
