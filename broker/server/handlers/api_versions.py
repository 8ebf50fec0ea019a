"""ApiVersions (key 18): the versions this broker serves (KIP-35, KIP-511).

An ApiVersions request of a version we do not serve is answered by the dispatcher with
``unsupported_version_response`` encoded as v0: error UNSUPPORTED_VERSION (35) and our range for
key 18, so the client retries with a version we have (reference 1.3, pitfall 8.3).

From v3 the request names the client software; a name or version outside KIP-511's pattern
(letters, digits, ``-`` and ``.``, starting and ending with a letter or digit) is answered
INVALID_REQUEST (42) with no api keys, as Kafka answers it (``ApiVersionsRequest.isValid``).

Features (KIP-584, v3+ tagged fields): the one feature pylog has levels of,
``transaction.version``, is supported 0-2 and finalized at 2 (transaction version 2, KIP-890 part
2: EndTxn v5's epoch bump, Produce v12's and TxnOffsetCommit v5's implicit add). Java clients
(3.9+) read the finalized level to decide on transaction version 2; the finalized features
epoch must be >= 0 for them to take it. As Kafka, a supported feature whose minimum is 0 is left
out of v3 answers (KAFKA-17011: v3 clients cannot read a minimum of 0).
"""

from __future__ import annotations

import re

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ApiVersionsResponse, ErrorCode, SUPPORTED_API_VERSIONS

__all__ = ["API_KEY", "handle", "unsupported_version_response", "supported_response"]

API_KEY = ApiKey.API_VERSIONS
_Version = ApiVersionsResponse.ApiVersion
_Supported = ApiVersionsResponse.SupportedFeatureKey
_Finalized = ApiVersionsResponse.FinalizedFeatureKey
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION_LEVEL = 2  # finalized; transaction.version levels 0-2 are supported
FINALIZED_FEATURES_EPOCH = 1
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_response(api_version: int = 4) -> ApiVersionsResponse:
    supported = [] if api_version < 4 else [
        _Supported(name=TRANSACTION_VERSION_FEATURE, min_version=0, max_version=TRANSACTION_VERSION_LEVEL)]
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[_Version(api_key=int(key), min_version=low, max_version=high)
                  for key, (low, high) in sorted(SUPPORTED_API_VERSIONS.items())],
        throttle_time_ms=0,
        supported_features=supported,
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[_Finalized(name=TRANSACTION_VERSION_FEATURE, max_version_level=TRANSACTION_VERSION_LEVEL,
                                       min_version_level=TRANSACTION_VERSION_LEVEL)],
    )


_SUPPORTED = supported_response()
_SUPPORTED_V3 = supported_response(3)  # (v0-2 carry no features at all: the codec drops them)


def unsupported_version_response() -> ApiVersionsResponse:
    """KIP-511: the v0 body with UNSUPPORTED_VERSION and at least key 18's range."""
    low, high = SUPPORTED_API_VERSIONS[ApiKey.API_VERSIONS]
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[_Version(api_key=int(ApiKey.API_VERSIONS), min_version=low, max_version=high)],
    )


async def handle(ctx: BrokerContext, header, request) -> ApiVersionsResponse:
    if header.api_version >= 3 and not all(
            _SOFTWARE_PATTERN.fullmatch(text or "")
            for text in (request.client_software_name, request.client_software_version)):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    return _SUPPORTED if header.api_version >= 4 else _SUPPORTED_V3


def error_response(header, request, error_code: int) -> ApiVersionsResponse:
    return unsupported_version_response()
