"""Small building blocks shared by every component."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi


def base_tags(project: str, stack: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The stack-wide tags (the ``required-tags`` policy checks the first three)."""
    tags = {"Project": project, "Stack": stack, "ManagedBy": "pulumi"}
    tags.update(extra or {})
    return tags


class CognisComponent(pulumi.ComponentResource):
    """A component whose children are tagged with the stack tags and ``Component``."""

    def __init__(
        self,
        type_token: str,
        name: str,
        tags: Mapping[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(type_token, name, None, opts)
        self._name = name
        self._tags = {**tags, "Component": type_token.split(":")[1]}

    def tags(self, name: str | None = None) -> dict[str, str]:
        """Tags for one child; ``name`` becomes the console-visible ``Name`` tag."""
        tags = dict(self._tags)
        if name:
            tags["Name"] = name
        return tags

    def child_opts(self, **kwargs) -> pulumi.ResourceOptions:
        """Resource options that parent a resource to this component."""
        return pulumi.ResourceOptions(parent=self, **kwargs)
