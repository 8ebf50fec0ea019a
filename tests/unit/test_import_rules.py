"""The import rules of docs/architecture.md, checked by reading every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# part -> (project packages it may import besides itself, modules it must never import)
NO_IO = {"asyncio", "socket", "selectors", "ssl", "kazoo"}
RULES = {
    "broker/wire": (set(), NO_IO),
    "broker/records": (set(), NO_IO),
    "broker/log": ({"broker.records"}, NO_IO),
    "broker/cluster": (set(), {"asyncio", "pyspark"}),
    # broker/security: SCRAM, PLAIN and TLS contexts shared by the broker and the client; sans-IO
    # (ssl only to build contexts and read certificates)
    "broker/security": (set(), {"asyncio", "socket", "selectors", "kazoo"}),
    "broker/client": ({"broker.wire", "broker.records", "broker.security"}, {"asyncio"}),
    "spark_log": ({"broker.client", "broker.records", "broker.wire"}, set()),
}
NEVER_IN_BROKER = {"pyspark", "spark_log"}
PROJECT = ("broker", "spark_log")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def project_part(module: str) -> str | None:
    """'broker.records.header' -> 'broker.records'; 'spark_log.x' -> 'spark_log'."""
    parts = module.split(".")
    if parts[0] == "spark_log":
        return "spark_log"
    if parts[0] == "broker" and len(parts) > 1:
        return f"broker.{parts[1]}"
    return "broker" if parts[0] == "broker" else None


def modules(part: str) -> list[Path]:
    return sorted((ROOT / part).rglob("*.py"))


@pytest.mark.parametrize("part", sorted(RULES))
def test_part_imports_only_what_it_may(part):
    allowed, forbidden = RULES[part]
    own = part.replace("/", ".")
    violations = []
    for path in modules(part):
        for module in imports_of(path):
            top = module.split(".")[0]
            owner = project_part(module)
            if top in forbidden or (owner and owner != own and owner not in allowed):
                violations.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not violations, "\n".join(violations)


def test_broker_never_imports_spark():
    violations = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in modules("broker")
        for module in imports_of(path)
        if module.split(".")[0] in NEVER_IN_BROKER
    ]
    assert not violations, "\n".join(violations)


def test_rules_see_the_code():
    """Guard against a rule test that passes because it read nothing."""
    assert modules("broker/records"), "broker/records has no modules?"
    assert "broker.records.errors" in imports_of(ROOT / "broker/records/header.py")
    assert project_part("broker.records.header") == "broker.records"


def test_authorization_core_is_pure():
    """broker/auth: the ACL model, the decision and the ZooKeeper codec import nothing of the
    project and do no I/O; only ``zk_store`` (the shell that watches ZooKeeper) uses kazoo and
    asyncio."""
    violations = []
    for path in modules("broker/auth"):
        for module in imports_of(path):
            part = project_part(module)
            if part is not None and part != "broker.auth":
                violations.append(f"{path.relative_to(ROOT)} imports {module}")
            if path.name != "zk_store.py" and module.split(".")[0] in NO_IO:
                violations.append(f"{path.relative_to(ROOT)} imports {module} (only zk_store may)")
    assert not violations, "\n".join(violations)
