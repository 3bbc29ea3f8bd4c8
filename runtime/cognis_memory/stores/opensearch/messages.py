"""The OpenSearch-only store's message role.

Messages with a client id claim ``message-keys/<owner-scoped client id>`` (``op_type=create``) before
the message is written; a retry after a crash in between writes the message under the claimed id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...domain import Message, Owner
from ...errors import ConflictError
from ..records import OPENSEARCH, epoch_us, message_from_row, message_to_row
from ..values import PagePosition
from .documents import owner_key, owner_query
from .indices import TS_US, OpenSearchIndices


class OpenSearchMessages:
    """The :class:`~cognis_memory.stores.roles.MessageLog` of an OpenSearch-only store."""

    def __init__(self, ix: OpenSearchIndices) -> None:
        self.ix = ix

    @staticmethod
    def _message_doc(m: Message) -> dict[str, Any]:
        return message_to_row(m, OPENSEARCH) | {TS_US: epoch_us(m.timestamp)}

    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        out: list[tuple[Message, bool]] = []
        for msg in messages:
            if msg.client_message_id is None:
                created = await self.ix.create(
                    self.ix.messages, owner_key(msg.tenant_id, msg.user_id, msg.id), self._message_doc(msg)
                )
                if not created:
                    raise ConflictError(f"message id {msg.id} exists already")
                out.append((msg, True))
                continue
            claim_id = owner_key(msg.tenant_id, msg.user_id, "client\x00" + msg.client_message_id)
            claim = {"tenant_id": msg.tenant_id, "user_id": msg.user_id, "message_id": msg.id}
            if await self.ix.create(self.ix.message_keys, claim_id, claim):
                await self.ix.create(
                    self.ix.messages, owner_key(msg.tenant_id, msg.user_id, msg.id), self._message_doc(msg)
                )
                out.append((msg, True))
                continue
            got = await self.ix.get_source(self.ix.message_keys, claim_id)
            assert got is not None, "a claimed client message id vanished"
            mid = got["_source"]["message_id"]
            stored = await self.ix.get_source(self.ix.messages, owner_key(msg.tenant_id, msg.user_id, mid))
            if stored is not None:
                out.append((message_from_row(stored["_source"], OPENSEARCH), False))
                continue
            # The first writer crashed between the claim and the message: finish its write.
            retry = dataclasses.replace(msg, id=mid)
            await self.ix.create(self.ix.messages, owner_key(msg.tenant_id, msg.user_id, mid), self._message_doc(retry))
            out.append((retry, True))
        return out

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]:
        docs = await self.ix.mget_sources(self.ix.messages, [owner_key(owner.tenant_id, owner.user_id, i) for i in ids])
        msgs = [message_from_row(d, OPENSEARCH) for d in docs]
        return sorted(msgs, key=lambda m: (m.timestamp, m.id))

    async def list_session_messages(
        self, owner: Owner, session_id: str, *, limit: int = 100, after: PagePosition | None = None
    ) -> list[Message]:
        filters = [*owner_query(owner)["bool"]["filter"], {"term": {"session_id": session_id}}]
        body: dict[str, Any] = {
            "size": limit,
            "sort": [{TS_US: "asc"}, {"id": "asc"}],
            "query": {"bool": {"filter": filters}},
            "track_total_hits": False,
        }
        if after is not None:
            body["search_after"] = [epoch_us(after.time), after.id]
        res = await self.ix.runner(
            self.ix.client.search, index=self.ix.messages, body=body, request_timeout=self.ix.search_timeout_s
        )
        return [message_from_row(h["_source"], OPENSEARCH) for h in res["hits"]["hits"]]
