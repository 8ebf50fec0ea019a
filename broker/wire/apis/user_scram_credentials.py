"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), KIP-554: list a
user's SCRAM mechanisms and iterations (never the keys), and add or delete credentials. The
client salts the password (``salted_password``); the broker derives and stores the keys.
Mechanism ids: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512. Both flexible from v0."""

from broker.wire.api import api
from broker.wire.schema import BYTES, INT8, INT16, INT32, STRING, array, field, struct

DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    50,
    "DescribeUserScramCredentials",
    valid="0",
    flexible="0+",
    request=[
        field("users", array(struct("UserName", field("name", STRING, "0+"))), "0+",
              nullable="0+", default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+", default=None),
        field("results", array(struct(
            "DescribeUserScramCredentialsResult",
            field("user", STRING, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+", default=None),
            field("credential_infos", array(struct(
                "CredentialInfo",
                field("mechanism", INT8, "0+"),
                field("iterations", INT32, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = api(
    51,
    "AlterUserScramCredentials",
    valid="0",
    flexible="0+",
    request=[
        field("deletions", array(struct(
            "ScramCredentialDeletion",
            field("name", STRING, "0+"),
            field("mechanism", INT8, "0+"),
        )), "0+"),
        field("upsertions", array(struct(
            "ScramCredentialUpsertion",
            field("name", STRING, "0+"),
            field("mechanism", INT8, "0+"),
            field("iterations", INT32, "0+"),
            field("salt", BYTES, "0+"),
            field("salted_password", BYTES, "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct(
            "AlterUserScramCredentialsResult",
            field("user", STRING, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+", default=None),
        )), "0+"),
    ],
)

DescribeUserScramCredentialsRequest = DESCRIBE_USER_SCRAM_CREDENTIALS.request_class
DescribeUserScramCredentialsResponse = DESCRIBE_USER_SCRAM_CREDENTIALS.response_class
AlterUserScramCredentialsRequest = ALTER_USER_SCRAM_CREDENTIALS.request_class
AlterUserScramCredentialsResponse = ALTER_USER_SCRAM_CREDENTIALS.response_class
