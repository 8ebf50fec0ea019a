"""``python -m broker.server``: configuration mistakes are one line naming the key, exit 2."""

from __future__ import annotations

import pytest

from broker.server.__main__ import main


@pytest.mark.parametrize("content, overrides, key", [
    ("broker.id=1\n", [], "zookeeper.connect"),
    ("broker.id=1\nzookeeper.connect=zk:2181\nnum.partitions=many\n", [], "num.partitions"),
    ("broker.id=1\nzookeeper.connect=zk:2181\n", ["log.segment.bytes=-3"], "log.segment.bytes"),
    ("broker.id=1\nzookeeper.connect=zk:2181\n", ["listeners"], "listeners"),
])
def test_invalid_configuration_exits_2_naming_the_key(tmp_path, capsys, content, overrides, key):
    path = tmp_path / "server.properties"
    path.write_text(content)
    argv = ["--config", str(path)] + [arg for o in overrides for arg in ("--set", o)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and err[0].startswith("pylog broker: invalid configuration")


def test_missing_file_exits_2(tmp_path, capsys):
    assert main(["--config", str(tmp_path / "absent.properties")]) == 2
    assert "cannot read" in capsys.readouterr().err
