"""Each store kind's test harness declares the server fixtures it starts, so that ``-m "not integration"``
selects a store suite's cases on exactly the kinds that need no server (``tests.store_kinds.kind_params``)."""

import inspect
import re

from tests.store_kinds import KINDS


def test_each_harness_declares_the_server_fixtures_it_asks_for() -> None:
    for kind, harness in KINDS.items():
        asked = set(re.findall(r"getfixturevalue\(\"(\w+)\"\)", inspect.getsource(type(harness))))
        assert asked == set(harness.servers), f"{kind}: asks for {sorted(asked)}, declares {sorted(harness.servers)}"
    assert [kind for kind, harness in KINDS.items() if not harness.servers] == ["embedded"]
