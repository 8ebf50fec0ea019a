"""What the group handlers share: handing a request to the group coordinator.

Every group API is decided by the pure core behind ``BrokerContext.groups``
(``broker.server.group_coordinator``); a handler only forwards the decoded request with the
client id (request header) and the client's address as Kafka writes it, Java's
``InetAddress.toString()`` of the peer without a host name, ``"/127.0.0.1"`` (JoinGroup records it:
DescribeGroups answers it, ``kafka-consumer-groups`` prints it, the group metadata record keeps it). Without a coordinator (a context built for unit tests) every group
request is answered COORDINATOR_NOT_AVAILABLE (15), which clients retry.
"""

from __future__ import annotations

from typing import Callable

from broker.server.context import BrokerContext
from broker.server.network import client_host
from broker.wire import ErrorCode

__all__ = ["forward"]


async def forward(ctx: BrokerContext, header, request, error_response: Callable):
    if ctx.groups is None:
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return await ctx.groups.handle(header.api_key, header.api_version, request, header.client_id,
                                   "/" + client_host())
