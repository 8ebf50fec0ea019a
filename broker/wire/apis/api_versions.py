"""ApiVersions (key 18): the first request on every connection (KIP-35; KIP-511 for v3+).

Quirks handled outside this spec (frame.py): the response header is always v0, even for the
flexible v3/v4 bodies; a request for a version we do not support is answered with a v0 body
carrying UNSUPPORTED_VERSION and our ApiVersions range, and a client decodes such an error
response as v0 whatever version it asked for.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct

API_VERSIONS = api(
    18,
    "ApiVersions",
    valid="0-4",
    flexible="3+",
    request=[
        # KIP-511: the client names itself; Kafka validates the charset, we do not (reference 1.3).
        field("client_software_name", STRING, "3+"),
        field("client_software_version", STRING, "3+"),
    ],
    response=[
        field("error_code", INT16, "0+"),
        field("api_keys", array(struct(
            "ApiVersion",
            field("api_key", INT16, "0+"),
            field("min_version", INT16, "0+"),
            field("max_version", INT16, "0+"),
        )), "0+"),
        field("throttle_time_ms", INT32, "1+"),
        # KIP-584 feature flags; optional, we send none.
        field("supported_features", array(struct(
            "SupportedFeatureKey",
            field("name", STRING, "3+"),
            field("min_version", INT16, "3+"),
            field("max_version", INT16, "3+"),
        )), "3+", tag=0),
        field("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
        field("finalized_features", array(struct(
            "FinalizedFeatureKey",
            field("name", STRING, "3+"),
            field("max_version_level", INT16, "3+"),
            field("min_version_level", INT16, "3+"),
        )), "3+", tag=2),
        field("zk_migration_ready", BOOL, "3+", default=False, tag=3),
    ],
)

ApiVersionsRequest = API_VERSIONS.request_class
ApiVersionsResponse = API_VERSIONS.response_class
