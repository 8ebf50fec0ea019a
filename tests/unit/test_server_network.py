"""broker.server.network over real loopback sockets with a scripted handler."""

from __future__ import annotations

import asyncio
import struct

import pytest

from broker.server.network import KafkaServer, NetworkLimits


class ScriptedHandler:
    """Frames are b"<delay ms>:<payload>"; answers the payload after the delay. 'boom' raises."""

    def __init__(self):
        self.active = 0
        self.active_peak = 0

    async def handle(self, frame: bytes) -> bytes | None:
        delay, payload = frame.removeprefix(COMMIT_KEY).split(b":", 1)
        self.active += 1
        self.active_peak = max(self.active_peak, self.active)
        try:
            await asyncio.sleep(int(delay) / 1000)
        finally:
            self.active -= 1
        if payload == b"boom":
            raise RuntimeError("handler bug")
        return None if payload == b"silent" else payload


COMMIT_KEY = b"\x00\x08"  # a frame starting with OffsetCommit's api key


def frame(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def run(limits: NetworkLimits, scenario):
    async def main():
        handler = ScriptedHandler()
        server = KafkaServer(handler, "127.0.0.1", 0, limits)
        await server.start()
        try:
            return await asyncio.wait_for(scenario(server, handler), 10)
        finally:
            await server.close()

    return asyncio.run(main())


async def connect(server):
    return await asyncio.open_connection("127.0.0.1", server.port)


def test_responses_in_request_order_even_when_later_ones_finish_first():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"300:first") + frame(b"200:second") + frame(b"100:third"))
        got = [await read_frame(reader) for _ in range(3)]
        writer.close()
        return got, handler.active_peak

    got, peak = run(NetworkLimits(), scenario)
    assert got == [b"first", b"second", b"third"]
    assert peak == 3  # they did run concurrently


def test_no_response_for_silent_requests():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"0:silent") + frame(b"0:after"))
        got = await read_frame(reader)
        writer.close()
        return got

    assert run(NetworkLimits(), scenario) == b"after"


@pytest.mark.parametrize("prefix", [
    pytest.param(struct.pack(">i", 2**31 - 1), id="2GiB"),
    pytest.param(struct.pack(">i", -5), id="negative"),
    pytest.param(b"GET / HTTP/1.1\r\n\r\n", id="http-get"),
])
def test_bad_frame_length_closes_only_that_connection(prefix):
    async def scenario(server, handler):
        bad_reader, bad_writer = await connect(server)
        good_reader, good_writer = await connect(server)
        bad_writer.write(prefix)
        closed = await bad_reader.read() == b""
        good_writer.write(frame(b"0:still-serving"))
        answer = await read_frame(good_reader)
        good_writer.close()
        return closed, answer, server.statistics().frames_rejected

    closed, answer, rejected = run(NetworkLimits(socket_request_bytes_max=1 << 20), scenario)
    assert closed and answer == b"still-serving" and rejected == 1


def test_inflight_bound_pauses_reading():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(b"".join(frame(b"50:r%d" % i) for i in range(20)))
        got = [await read_frame(reader) for _ in range(20)]
        writer.close()
        return got, handler.active_peak

    got, peak = run(NetworkLimits(inflight_requests_max=3), scenario)
    assert got == [b"r%d" % i for i in range(20)]
    assert peak == 3  # exactly the bound: pipelined, never more


def test_small_offset_commits_count_as_an_eighth_of_a_request():
    def run_frames(payloads):
        async def scenario(server, handler):
            reader, writer = await connect(server)
            writer.write(b"".join(frame(p) for p in payloads))
            got = [await read_frame(reader) for _ in payloads]
            writer.close()
            return got, handler.active_peak

        got, peak = run(NetworkLimits(inflight_requests_max=3), scenario)
        assert got == [p.removeprefix(COMMIT_KEY).split(b":", 1)[1] for p in payloads]
        return peak

    commits = [COMMIT_KEY + b"50:c%d" % i for i in range(30)]
    assert run_frames(commits) == 24  # 3 slots of 8 eighths
    big_commit = COMMIT_KEY + b"50:" + b"x" * 4096  # over LIGHT_REQUEST_BYTES_MAX: a whole slot
    assert run_frames(commits[:17] + [big_commit] + commits[17:27]) == 18  # 17 eighths + 8 >= 24: stop


def test_a_plain_handle_is_called_after_the_earlier_requests_started():
    """``handle`` may be a plain function reading connection state the previous request set
    (the SASL authenticator's phase): it is called in the request's task, in order."""
    log = []

    class PlainHandle:
        def handle(self, frame):
            log.append(("called", frame))
            return self._run(frame)

        async def _run(self, frame):
            log.append(("ran", frame))
            return frame

    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"a") + frame(b"b"))
        got = [await read_frame(reader) for _ in range(2)]
        writer.close()
        return got

    assert run_with(PlainHandle(), NetworkLimits(), scenario) == [b"a", b"b"]
    assert log == [("called", b"a"), ("ran", b"a"), ("called", b"b"), ("ran", b"b")]


def test_handler_failure_closes_connection_after_earlier_responses():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        other_reader, other_writer = await connect(server)
        writer.write(frame(b"0:ok") + frame(b"0:boom") + frame(b"0:never"))
        first = await read_frame(reader)
        rest = await reader.read()
        other_writer.write(frame(b"0:fine"))
        other = await read_frame(other_reader)
        other_writer.close()
        return first, rest, other

    assert run(NetworkLimits(), scenario) == (b"ok", b"", b"fine")


def test_connection_limit_and_idle_timeout():
    async def scenario(server, handler):
        first = await connect(server)
        second_reader, _ = await connect(server)
        refused = await second_reader.read() == b""
        idle_closed = await asyncio.wait_for(first[0].read(), 3) == b""
        return refused, idle_closed, server.statistics().connections_refused

    refused, idle_closed, count = run(
        NetworkLimits(connections_max=1, connections_max_idle_ms=300), scenario)
    assert refused and idle_closed and count == 1


class ChunkHandler(ScriptedHandler):
    """Answers b"list:<payload>" with pre-framed chunks (as encode_response_chunks returns) and
    b"close:" by asking for the connection to close."""

    async def handle(self, frame: bytes):
        from broker.server.network import CloseConnection

        if frame.startswith(b"list:"):
            payload = frame[5:]
            return [struct.pack(">i", len(payload)), payload[:2], memoryview(payload)[2:]]
        if frame.startswith(b"close:"):
            raise CloseConnection("asked to")
        return await super().handle(frame)


def run_with(handler, limits, scenario, drain_timeout_s=0.0):
    async def main():
        server = KafkaServer(handler, "127.0.0.1", 0, limits)
        await server.start()
        try:
            return await asyncio.wait_for(scenario(server, handler), 10)
        finally:
            await server.close(drain_timeout_s)

    return asyncio.run(main())


def test_chunked_responses_are_written_whole_and_in_order():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"list:abcdef") + frame(b"0:plain"))
        got = [await read_frame(reader) for _ in range(2)]
        writer.close()
        return got

    assert run_with(ChunkHandler(), NetworkLimits(), scenario) == [b"abcdef", b"plain"]


def test_close_connection_answers_earlier_requests_first():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"50:before") + frame(b"close:") + frame(b"0:after"))
        first = await read_frame(reader)
        return first, await reader.read()

    assert run_with(ChunkHandler(), NetworkLimits(), scenario) == (b"before", b"")


def test_graceful_close_answers_requests_already_read():
    async def main():
        server = KafkaServer(ScriptedHandler(), "127.0.0.1", 0, NetworkLimits())
        await server.start()
        port = server.port
        reader, writer = await connect(server)
        writer.write(frame(b"300:in-flight"))
        await asyncio.sleep(0.1)  # read by the server, still being handled
        closing = asyncio.create_task(server.close(drain_timeout_s=5))
        answer = await read_frame(reader)
        rest = await reader.read()
        await closing
        try:
            await asyncio.open_connection("127.0.0.1", port)
            refused = False
        except OSError:
            refused = True
        return answer, rest, refused

    assert asyncio.run(asyncio.wait_for(main(), 10)) == (b"in-flight", b"", True)


def test_start_without_serving_binds_first():
    async def main():
        server = KafkaServer(ScriptedHandler(), "127.0.0.1", 0, NetworkLimits())
        await server.start(start_serving=False)
        port = server.port
        await server.start_serving()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"0:up"))
        got = await read_frame(reader)
        writer.close()
        await server.close()
        return port > 0, got

    assert asyncio.run(main()) == (True, b"up")


def test_frames_split_across_reads_and_many_in_one_read():
    """Frames arrive byte by byte, or many in one segment: each is cut out whole, in order."""
    async def scenario(server, handler):
        reader, writer = await connect(server)
        data = frame(b"0:one") + frame(b"0:two")
        for i in range(len(data)):
            writer.write(data[i:i + 1])
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"".join(frame(b"0:n%d" % i) for i in range(50)))
        got = [await read_frame(reader) for _ in range(52)]
        writer.close()
        return got

    got = run(NetworkLimits(inflight_requests_max=4), scenario)
    assert got == [b"one", b"two"] + [b"n%d" % i for i in range(50)]


def test_half_closed_peer_gets_its_answers():
    """A client that shuts down its sending side after its requests still gets every answer,
    then the broker closes."""
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"100:slow") + frame(b"0:fast"))
        writer.write_eof()
        got = [await read_frame(reader) for _ in range(2)]
        return got, await reader.read()

    assert run(NetworkLimits(), scenario) == ([b"slow", b"fast"], b"")


def test_slow_reader_pauses_the_connection_not_the_broker():
    """A client that does not read its (large) responses fills the transport's buffer; its
    requests then wait in the queue and reading pauses at the in-flight bound, while another
    connection is served. Once the client reads, every response arrives whole and in order."""
    big = b"x" * (1 << 20)

    class BigHandler(ScriptedHandler):
        async def handle(self, frame: bytes):
            return big if frame == b"big" else await super().handle(frame)

    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(b"".join(frame(b"big") for _ in range(20)))
        await asyncio.sleep(0.3)  # nothing read by the client: the broker holds back
        other_reader, other_writer = await connect(server)
        other_writer.write(frame(b"0:other"))
        other = await read_frame(other_reader)
        got = [await read_frame(reader) for _ in range(20)]
        writer.close()
        other_writer.close()
        return other, all(g == big for g in got), len(got)

    assert run_with(BigHandler(), NetworkLimits(inflight_requests_max=4), scenario) == (b"other", True, 20)


def test_client_host_is_the_peers_address_inside_a_request_and_empty_outside():
    from broker.server.network import client_host

    class HostHandler:
        async def handle(self, frame: bytes) -> bytes:
            await asyncio.sleep(0)  # still the connection's context after a suspension
            return client_host().encode()

    async def main():
        server = KafkaServer(HostHandler(), "127.0.0.1", 0, NetworkLimits())
        await server.start()
        try:
            reader, writer = await connect(server)
            writer.write(frame(b"a") + frame(b"b"))
            got = [await read_frame(reader) for _ in range(2)]
            writer.close()
            return got
        finally:
            await server.close()

    assert asyncio.run(asyncio.wait_for(main(), 10)) == [b"127.0.0.1"] * 2
    assert client_host() == ""


def test_principal_is_anonymous_until_set_and_then_the_connections_alone():
    from broker.server.network import ANONYMOUS, principal, set_principal

    class LoginHandler:
        """b"login:<name>" authenticates the connection; anything else answers its principal."""

        async def handle(self, frame: bytes) -> bytes:
            if frame.startswith(b"login:"):
                set_principal("User:" + frame[6:].decode())
            await asyncio.sleep(0)
            return principal().encode()

    async def main():
        server = KafkaServer(LoginHandler(), "127.0.0.1", 0, NetworkLimits())
        await server.start()
        try:
            (r1, w1), (r2, w2) = await connect(server), await connect(server)
            w1.write(frame(b"who"))
            before = await read_frame(r1)
            w1.write(frame(b"login:alice") + frame(b"who"))
            after = [await read_frame(r1) for _ in range(2)]
            w2.write(frame(b"who"))
            other = await read_frame(r2)
            w1.close(), w2.close()
            return before, after, other
        finally:
            await server.close()

    before, after, other = asyncio.run(asyncio.wait_for(main(), 10))
    assert before == ANONYMOUS.encode() == b"User:ANONYMOUS"
    assert after == [b"User:alice"] * 2
    assert other == b"User:ANONYMOUS"
    assert principal() == ANONYMOUS


class StartingHandler:
    """A handler with ``start`` (as ``Dispatcher.start``): frames b"f<ms>:<payload>" answer with
    ``(future, finish)`` (the future resolved after the delay), b"a<ms>:<payload>" with a
    coroutine; b"x:" raises in ``start``. ``started`` is the order the handlers began in."""

    def __init__(self):
        self.started: list[bytes] = []
        self.tasks_at_start: list[bool] = []

    def start(self, frame: bytes):
        kind, rest = frame[:1], frame[1:]
        if kind == b"x":
            raise RuntimeError("handler bug in start")
        delay, payload = rest.split(b":", 1)
        if kind == b"a":
            return self._answer(int(delay), payload)
        self.started.append(payload)
        self.tasks_at_start.append(asyncio.current_task() is not None)
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(int(delay) / 1000, future.set_result, payload)
        return future, lambda answer: answer + b"!"

    async def handle(self, frame: bytes):
        """The path of a request started behind a task that has not run yet."""
        answer = self.start(frame)
        if isinstance(answer, tuple):
            future, finish = answer
            return finish(await future)
        return await answer

    async def _answer(self, delay_ms: int, payload: bytes) -> bytes:
        self.started.append(payload)
        self.tasks_at_start.append(True)
        await asyncio.sleep(delay_ms / 1000)
        return payload


def run_starting(scenario, limits: NetworkLimits = NetworkLimits()):
    async def main():
        handler = StartingHandler()
        server = KafkaServer(handler, "127.0.0.1", 0, limits)
        await server.start()
        try:
            return await asyncio.wait_for(scenario(server, handler), 10)
        finally:
            await server.close()

    return asyncio.run(main())


def test_started_handlers_answer_in_order_and_start_in_arrival_order():
    """Future answers need no task; a request after one left to a task (a coroutine handler)
    still starts after it, and every answer goes out in request order."""
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"f200:one") + frame(b"f0:two") + frame(b"a100:three") + frame(b"f0:four"))
        got = [await read_frame(reader) for _ in range(4)]
        writer.write(frame(b"f0:five"))
        got.append(await read_frame(reader))
        writer.close()
        return got, handler.started, handler.tasks_at_start

    got, started, tasks = run_starting(scenario)
    assert got == [b"one!", b"two!", b"three", b"four!", b"five!"]
    assert started == [b"one", b"two", b"three", b"four", b"five"]
    assert tasks == [False, False, True, True, False]  # four waited behind three's task


def test_start_that_raises_closes_after_earlier_answers():
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(frame(b"f50:ok") + frame(b"x:") + frame(b"f0:never"))
        first = await read_frame(reader)
        rest = await reader.read()
        writer.close()
        return first, rest

    assert run_starting(scenario) == (b"ok!", b"")


def test_started_handlers_beyond_the_inflight_bound_start_from_an_answer():
    """Frames held back by the in-flight bound are started when an answer makes room, from
    the answer's callback (inside the connection's context)."""
    async def scenario(server, handler):
        reader, writer = await connect(server)
        writer.write(b"".join(frame(b"f10:%d" % i) for i in range(6)))
        got = [await read_frame(reader) for _ in range(6)]
        writer.close()
        return got, handler.tasks_at_start

    got, tasks = run_starting(scenario, NetworkLimits(inflight_requests_max=2))
    assert got == [b"%d!" % i for i in range(6)]
    assert tasks == [False] * 6
