"""The pure parts of ``broker.tools.zookeeper``: settings, zoo.cfg, finding the install."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from broker.tools.zookeeper import (
    DEFAULT_SETTINGS,
    ZooKeeperError,
    find_free_port,
    find_install,
    load_properties,
    render_zoo_cfg,
    reserve_free_port,
)

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_properties_hold_the_documented_values():
    settings = load_properties(ROOT / "conf" / "zookeeper.properties")
    assert settings == {
        "tickTime": "2000",
        "dataDir": "/tmp/pylog/zookeeper/data",
        "clientPort": "2181",
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "maxClientCnxns": "60",
    }
    # The defaults used without a file say the same thing.
    assert {k: settings[k] for k in DEFAULT_SETTINGS} == DEFAULT_SETTINGS


def test_every_shipped_setting_has_a_comment():
    lines = (ROOT / "conf" / "zookeeper.properties").read_text().splitlines()
    for index, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert lines[index - 1].startswith("#"), f"no comment above {line!r}"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a=1\n", {"a": "1"}),
        ("# c\n! c\n\n  a = x=y \n", {"a": "x=y"}),
        ("a=1\na=2\n", {"a": "2"}),
        ("a=\n", {"a": ""}),
    ],
)
def test_load_properties(tmp_path, text, expected):
    path = tmp_path / "p.properties"
    path.write_text(text)
    assert load_properties(path) == expected


@pytest.mark.parametrize("text", ["novalue\n", "=1\n", "a=1 \\\n  2\n"])
def test_load_properties_refuses_what_it_would_misread(tmp_path, text):
    path = tmp_path / "p.properties"
    path.write_text(text)
    with pytest.raises(ValueError, match="p.properties:1"):
        load_properties(path)


def test_render_zoo_cfg_overrides_data_dir_and_port():
    text = render_zoo_cfg({"tickTime": "500", "dataDir": "/elsewhere", "clientPort": "1"}, "/data", 2182)
    lines = text.splitlines()
    assert "tickTime=500" in lines
    assert "dataDir=/data" in lines and "dataDir=/elsewhere" not in lines
    assert "clientPort=2182" in lines
    assert "clientPortAddress=127.0.0.1" in lines and "admin.enableServer=false" in lines
    assert text.endswith("\n")


def test_render_zoo_cfg_refuses_injection():
    with pytest.raises(ValueError):
        render_zoo_cfg({"tickTime": "2000\nclientPortAddress=0.0.0.0"}, "/data", 2181)


def _fake_java(tmp_path: Path) -> dict[str, str]:
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    return {"JAVA_HOME": str(java_home), "PATH": ""}


def test_find_install_without_zookeeper_names_make_setup(tmp_path):
    env = _fake_java(tmp_path)
    with pytest.raises(ZooKeeperError, match="make setup") as info:
        find_install(env, debian_jar=tmp_path / "missing.jar")
    assert "missing.jar" in str(info.value)


def test_find_install_without_java_names_make_setup(tmp_path):
    with pytest.raises(ZooKeeperError, match="no java.*make setup"):
        find_install({"PATH": str(tmp_path)}, debian_jar=tmp_path / "missing.jar")


def test_find_install_zookeeper_home(tmp_path):
    env = _fake_java(tmp_path)
    home = tmp_path / "apache-zookeeper-3.8.4-bin"
    (home / "lib").mkdir(parents=True)
    for jar in ("zookeeper-3.8.4.jar", "zookeeper-jute-3.8.4.jar", "netty-handler-4.1.jar"):
        (home / "lib" / jar).write_bytes(b"")
    install = find_install({**env, "ZOOKEEPER_HOME": str(home)}, debian_jar=tmp_path / "missing.jar")
    assert install.java == env["JAVA_HOME"] + "/bin/java"
    assert str(home / "lib" / "zookeeper-3.8.4.jar") in install.classpath
    assert install.classpath[-1] == str(home / "conf")


def test_find_install_zookeeper_home_without_jars(tmp_path):
    env = _fake_java(tmp_path)
    with pytest.raises(ZooKeeperError, match="no zookeeper jar"):
        find_install({**env, "ZOOKEEPER_HOME": str(tmp_path)}, debian_jar=tmp_path / "missing.jar")


def test_find_install_debian_layout(tmp_path):
    env = _fake_java(tmp_path)
    share = tmp_path / "share-java"
    share.mkdir()
    for jar in ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar"):
        (share / jar).write_bytes(b"")
    install = find_install(env, debian_jar=share / "zookeeper.jar", debian_conf_dir=tmp_path / "conf")
    assert install.classpath == (
        str(share / "zookeeper.jar"), str(share / "slf4j-log4j12.jar"), str(share / "log4j-1.2.jar"),
        str(tmp_path / "conf"),
    )


def test_find_free_port_can_be_bound():
    port = find_free_port()
    assert 0 < port < 65536
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_reserved_port_is_held_from_probes_but_a_server_binds_it():
    # A probe (bind without SO_REUSEADDR, as bind(0) and connect() pick) is refused: another
    # process cannot be handed the port between the reservation and the server's bind.
    ports = {reserve_free_port() for _ in range(20)}
    assert len(ports) == 20
    for port in ports:
        with socket.socket() as probe, pytest.raises(OSError):
            probe.bind(("127.0.0.1", port))
    assert not ports & {find_free_port() for _ in range(2000)}
    # A server binds with SO_REUSEADDR (Java's ServerSocketChannel, asyncio): it gets the port.
    for port in ports:
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen()
