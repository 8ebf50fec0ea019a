"""A raw Kafka connection for tests: frames built with ``broker.wire`` (or bytes built by hand),
sent on a plain socket, answers read back with a deadline.

Shared by the integration tier (``test_broker_bad_input.py``, a pylog broker against bad input)
and the peer tier (``tests/peer``, the same bytes to Apache Kafka and to pylog), which loads this
file by path.
"""

from __future__ import annotations

import itertools
import socket
import struct

from broker.wire import decode_response, encode_request, with_size_prefix

__all__ = ["Raw"]

SOCKET_TIMEOUT_S = 10.0
_correlation_ids = itertools.count(100)


class Raw:
    """A raw socket to a broker, speaking frames built with broker.wire (or not at all)."""

    def __init__(self, port: int, client_id: str = "bad-input", timeout_s: float = SOCKET_TIMEOUT_S) -> None:
        self.client_id = client_id
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, request) -> int:
        correlation_id = next(_correlation_ids)
        self.sock.sendall(with_size_prefix(encode_request(api_key, version, correlation_id, self.client_id, request)))
        return correlation_id

    def receive_frame(self) -> bytes:
        """One response frame (without its size prefix); ConnectionError if the peer closed."""
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def receive(self, api_key: int, version: int, correlation_id: int):
        got, response = decode_response(api_key, version, self.receive_frame())
        assert got == correlation_id
        return response

    def call(self, api_key: int, version: int, request):
        return self.receive(api_key, version, self.send(api_key, version, request))

    def closed_without_answer(self) -> bool:
        """True if the broker closed the connection without sending one byte (False if it sent
        something; socket.timeout if it did neither within the socket's timeout)."""
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        return data == b""

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data
