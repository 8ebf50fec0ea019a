"""ApiVersions (key 18): the versions this broker serves (KIP-35, KIP-511).

An ApiVersions request of a version we do not serve is answered by the dispatcher with
``unsupported_version_response`` encoded as v0: error UNSUPPORTED_VERSION (35) and our range for
key 18, so the client retries with a version we have (reference 1.3, pitfall 8.3).

From v3 the request names the client software; a name or version outside KIP-511's pattern
(letters, digits, ``-`` and ``.``, starting and ending with a letter or digit) is answered
INVALID_REQUEST (42) with no api keys, as Kafka answers it (``ApiVersionsRequest.isValid``).
"""

from __future__ import annotations

import re

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ApiVersionsResponse, ErrorCode, SUPPORTED_API_VERSIONS

__all__ = ["API_KEY", "handle", "unsupported_version_response", "supported_response"]

API_KEY = ApiKey.API_VERSIONS
_Version = ApiVersionsResponse.ApiVersion
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[_Version(api_key=int(key), min_version=low, max_version=high)
                  for key, (low, high) in sorted(SUPPORTED_API_VERSIONS.items())],
        throttle_time_ms=0,
    )


_SUPPORTED = supported_response()


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
    return _SUPPORTED


def error_response(header, request, error_code: int) -> ApiVersionsResponse:
    return unsupported_version_response()
