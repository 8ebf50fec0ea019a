"""``pylog configs --entity-type users``: SCRAM credentials, as ``kafka-configs.sh`` adds them
(KIP-554: AlterUserScramCredentials / DescribeUserScramCredentials, to any broker).

    pylog configs --bootstrap-server B --command-config admin.properties --alter \\
        --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    pylog configs --bootstrap-server B --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    pylog configs --bootstrap-server B --describe --entity-type users [--entity-name alice]

As kafka-configs does, the password is salted here (32 random bytes, PBKDF2 with ``iterations``,
default 4096) and only the salted password travels; the broker derives and stores the keys. The
password never appears in output. Output lines are kafka-configs': ``Completed updating config
for user alice.`` and ``SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=4096``.
"""

from __future__ import annotations

import os
from typing import TextIO

from broker.client import AdminClient, KafkaError
from broker.security.scram import ITERATIONS_MIN, MECHANISMS, mechanism_id, mechanism_name, salted_password
from broker.wire import ApiKey

__all__ = ["alter_users", "describe_users"]

SALT_BYTES = 32


def _scram_upsertions(user: str, added: dict[str, str]) -> list[dict]:
    out = []
    for mechanism, settings in added.items():
        if mechanism not in MECHANISMS:
            raise ValueError(f"Invalid config(s): {mechanism} (users take SCRAM-SHA-256 and SCRAM-SHA-512)")
        fields = dict(part.split("=", 1) for part in settings.split(",") if "=" in part)
        if "password" not in fields:
            raise ValueError(f"{mechanism} needs password=<password>")
        iterations = int(fields.get("iterations", ITERATIONS_MIN))
        salt = os.urandom(SALT_BYTES)
        out.append({"name": user, "mechanism": mechanism_id(mechanism), "iterations": iterations, "salt": salt,
                    "salted_password": salted_password(mechanism, fields["password"].encode(), salt, iterations)})
    return out


def alter_users(admin: AdminClient, user: str, added: dict[str, str], deleted: list[str], out: TextIO) -> int:
    for mechanism in deleted:
        if mechanism not in MECHANISMS:
            raise ValueError(f"Invalid config(s): {mechanism}")
    request = {"upsertions": _scram_upsertions(user, added),
               "deletions": [{"name": user, "mechanism": mechanism_id(m)} for m in deleted]}
    response = admin.cluster.any_connection().request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request)
    for result in response.results:
        if result.error_code:
            raise KafkaError(result.error_code, result.error_message)
    print(f"Completed updating config for user {user}.", file=out)
    return 0


def describe_users(admin: AdminClient, user: str | None, out: TextIO) -> int:
    request = {"users": [{"name": user}] if user else None}
    response = admin.cluster.any_connection().request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request)
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message)
    for result in response.results:
        if result.error_code:
            raise KafkaError(result.error_code, result.error_message)
        credentials = ", ".join(f"{mechanism_name(c.mechanism)}=iterations={c.iterations}"
                                for c in result.credential_infos)
        print(f"SCRAM credential configs for user-principal '{result.user}' are {credentials}", file=out)
    return 0
