"""What a store is built with besides its own settings (:class:`StoreContext`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoreContext:
    """What a store is built with besides its own settings: its kind (``COGNIS_STORE``), the sizes of the
    full and short vectors, the vector space they belong to (the embedding model's, recorded by the store)
    and the AWS region of the AWS clients (Secrets Manager, RDS IAM, OpenSearch SigV4)."""

    kind: str
    dim: int
    dim_short: int
    vector_space: str | None = None
    aws_region: str | None = None
