"""Import rules of the controller, replication, coordinator and simulation parts (docs/architecture.md):
the logic the simulator drives must stay free of sockets and kazoo (and of asyncio, except the
purgatory's waiters in broker/replica), so that it runs the same in a broker and in one
deterministic process."""

from __future__ import annotations

import pytest
from test_import_rules import NO_IO, ROOT, imports_of, modules, project_part

RULES = {
    "broker/controller": ({"broker.cluster"}, NO_IO),
    "broker/replica": ({"broker.records", "broker.log", "broker.wire", "broker.cluster"}, NO_IO - {"asyncio"}),
    "broker/sim": ({"broker.cluster", "broker.controller", "broker.replica", "broker.records", "broker.log",
                    "broker.wire", "broker.coordinator"}, NO_IO),
    # the group (and later transaction) coordinators: pure state machines over wire messages
    "broker/coordinator": ({"broker.wire"}, NO_IO),
}


@pytest.mark.parametrize("part", sorted(RULES))
def test_part_imports_only_what_it_may(part):
    allowed, forbidden = RULES[part]
    own = part.replace("/", ".")
    violations = []
    for path in modules(part):
        for module in imports_of(path):
            owner = project_part(module)
            if module.split(".")[0] in forbidden or (owner and owner != own and owner not in allowed):
                violations.append(f"{path.relative_to(ROOT)} imports {module}")
    assert modules(part) and not violations, "\n".join(violations)


def test_only_the_purgatory_uses_asyncio_in_replica():
    users = [p.name for p in modules("broker/replica") if "asyncio" in imports_of(p)]
    assert users == ["purgatory.py"]


def test_the_cluster_layer_uses_only_the_controllers_logic_through_its_protocol():
    """broker.cluster (kazoo) must not depend on the controller; the dependency goes the other way."""
    assert not [m for p in modules("broker/cluster") for m in imports_of(p) if m.startswith("broker.controller")]
