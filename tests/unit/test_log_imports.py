"""Import rules of broker/log: the standard library, numpy and broker.records only; and no
direct clock reads in the log's logic (time reaches it as an injected ``now_ms``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import broker.log

LOG_DIR = Path(broker.log.__file__).parent
ALLOWED_THIRD_PARTY = {"numpy"}
ALLOWED_PROJECT = ("broker.records", "broker.log")


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: use absolute imports"
            names.append(node.module or "")
    return names


def test_log_imports_only_stdlib_numpy_and_records() -> None:
    files = sorted(LOG_DIR.glob("*.py"))
    assert len(files) >= 10
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            ok = (
                top in sys.stdlib_module_names
                or top in ALLOWED_THIRD_PARTY
                or name == "__future__"
                or any(name == p or name.startswith(p + ".") for p in ALLOWED_PROJECT)
            )
            assert ok, f"{path.name} imports {name}"
            assert top not in {"asyncio", "socket", "kazoo", "selectors"}, f"{path.name}: {name}"


def test_no_direct_clock_reads_outside_the_default_clock() -> None:
    for path in sorted(LOG_DIR.glob("*.py")):
        source = path.read_text()
        for call in ("time.time(", "time.monotonic(", "datetime.now(", "time.time_ns("):
            count = source.count(call)
            if path.name == "manager.py" and call == "time.time_ns(":
                assert count == 1  # wall_clock_ms, the default at the outer constructor
            else:
                assert count == 0, f"{path.name} calls {call}"


def test_no_buffered_file_objects_for_segment_data() -> None:
    names = ("segment.py", "offset_index.py", "time_index.py", "log.py", "fileio.py", "loader.py")
    for name in names:
        tree = ast.parse((LOG_DIR / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "open", f"{name}: builtin open() at line {node.lineno}"
            if isinstance(node, ast.Attribute) and node.attr in ("read_bytes", "write_bytes"):
                raise AssertionError(f"{name}: Path.{node.attr} at line {node.lineno}")
        assert "io" not in imported_modules(LOG_DIR / name)
