"""Fixtures of the integration tier; they and the helpers live in ``integration_support.py``.

``zookeeper`` (one server for the whole run) is registered by tests/conftest.py; the helpers are
re-exported here only for test files that still say ``from conftest import ...`` (import them from
``integration_support``: ``conftest`` names whichever tier's conftest was loaded last).
"""

from integration_support import *  # noqa: F403  (helpers, for old `from conftest import` lines)
from integration_support import broker_cluster, zk_chroot, zk_client, zk_client_factory, zk_connect, zk_root  # noqa: F401
