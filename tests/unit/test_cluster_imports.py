"""Import rules for ``broker/cluster``: it needs no other part of pylog, and only ``zk.py`` (the
kazoo adapter) may do I/O, so names, paths, layout and assignment stay pure and testable alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_import_rules import imports_of

CLUSTER = Path(__file__).resolve().parents[2] / "broker" / "cluster"
IO_MODULES = {"kazoo", "socket", "asyncio", "selectors", "ssl", "subprocess", "threading", "time", "os"}
ADAPTERS = {"zk.py"}


MODULES = sorted(CLUSTER.glob("*.py"))


def test_rules_see_the_code():
    assert {p.name for p in MODULES} >= {"zk.py", "layout.py", "names.py", "paths.py", "errors.py"}
    assert "kazoo.client" in imports_of(CLUSTER / "zk.py")


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_cluster_imports_no_other_part_of_pylog(path):
    foreign = {m for m in imports_of(path) if m.split(".")[0] in ("broker", "spark_log", "pyspark")}
    assert {m for m in foreign if not m.startswith("broker.cluster")} == set()


@pytest.mark.parametrize("path", [p for p in MODULES if p.name not in ADAPTERS], ids=lambda p: p.name)
def test_pure_modules_do_no_io(path):
    assert {m for m in imports_of(path) if m.split(".")[0] in IO_MODULES} == set()
