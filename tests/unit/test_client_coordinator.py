"""broker.client.coordinator.find_coordinator against a scripted FakeBroker: the version it
picks and the body it sends at each, the retries of COORDINATOR_NOT_AVAILABLE /
COORDINATOR_LOAD_IN_PROGRESS with backoff until the deadline, and the errors it raises."""

from __future__ import annotations

import pytest
from fake_kafka import CLOSE, FakeBroker, api_versions_response

from broker.client.config import SYSTEM_CLOCK, ClientConfig
from broker.client.coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    RETRY_BACKOFF_MAX_MS,
    Coordinator,
    find_coordinator,
)
from broker.client.errors import KafkaError
from broker.client.metadata import Cluster
from broker.wire import SUPPORTED_API_VERSIONS, ApiKey, ErrorCode, FindCoordinatorResponse

FAST = ClientConfig(request_timeout_ms=2000, connect_timeout_ms=1000, retry_backoff_ms=5)


class RecordingClock:
    """The system clock, remembering every backoff asked of it."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def monotonic_ms(self) -> float:
        return SYSTEM_CLOCK.monotonic_ms()

    def time_ms(self) -> int:
        return SYSTEM_CLOCK.time_ms()

    def sleep_ms(self, ms: float) -> None:
        self.sleeps.append(ms)
        SYSTEM_CLOCK.sleep_ms(ms)


def answer(version: int, key: str, code: int = 0, node=(7, "coord.example", 9097), message=None):
    node_id, host, port = node if code == 0 else (-1, "", -1)
    if version >= 4:
        return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
            key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=message)])
    return FindCoordinatorResponse(error_code=code, error_message=message, node_id=node_id, host=host, port=port)


class Script:
    """A broker handler: ApiVersions offers ``versions`` of FindCoordinator; FindCoordinator
    answers the next code of ``codes`` (the last one repeats), or CLOSE for "close"."""

    def __init__(self, codes, versions=(0, 4), message=None) -> None:
        self.codes = list(codes)
        self.offered = {**SUPPORTED_API_VERSIONS, ApiKey.FIND_COORDINATOR: versions}
        self.message = message

    def __call__(self, header, request):
        if header.api_key == ApiKey.API_VERSIONS:
            return api_versions_response(self.offered)
        assert header.api_key == ApiKey.FIND_COORDINATOR
        code = self.codes.pop(0) if len(self.codes) > 1 else self.codes[0]
        if code == "close":
            return CLOSE
        key = request.coordinator_keys[0] if header.api_version >= 4 else request.key
        return answer(header.api_version, key, code, message=self.message)


def run_against(script, key="g", key_type=KEY_TYPE_GROUP, config=FAST, clock=SYSTEM_CLOCK, **kw):
    with FakeBroker(script) as broker:
        cluster = Cluster(broker.address, config, clock)
        try:
            return find_coordinator(cluster, key, key_type, **kw), broker
        finally:
            cluster.close()
            assert broker.handler_errors == []


@pytest.mark.parametrize("high", [0, 1, 2, 3, 4])
def test_picks_the_highest_common_version_and_its_body(high):
    node, broker = run_against(Script([0], versions=(0, high)))
    assert node == Coordinator(7, "coord.example", 9097)
    assert tuple(node) == (7, "coord.example", 9097)
    [(header, request)] = broker.requests_for(ApiKey.FIND_COORDINATOR)
    assert header.api_version == high
    if high >= 4:
        assert (request.coordinator_keys, request.key_type) == (["g"], KEY_TYPE_GROUP)
    else:
        assert request.key == "g"


def test_a_transactional_id_needs_v1_and_sends_key_type_1():
    node, broker = run_against(Script([0], versions=(0, 3)), key="tx", key_type=KEY_TYPE_TRANSACTION)
    [(header, request)] = broker.requests_for(ApiKey.FIND_COORDINATOR)
    assert (header.api_version, request.key, request.key_type) == (3, "tx", KEY_TYPE_TRANSACTION)
    with pytest.raises(KafkaError) as info:
        run_against(Script([0], versions=(0, 0)), key="tx", key_type=KEY_TYPE_TRANSACTION)
    assert info.value.code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize("version", [2, 4])
def test_retries_not_available_and_loading_with_growing_backoff(version):
    clock = RecordingClock()
    codes = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 3 + [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "close", 0]
    node, broker = run_against(Script(codes, versions=(0, version)), clock=clock)
    assert node.node_id == 7
    assert len(broker.requests_for(ApiKey.FIND_COORDINATOR)) == 6
    assert clock.sleeps == [5, 10, 20, 40, 80]


def test_gives_up_at_the_deadline_with_the_last_error():
    clock = RecordingClock()
    start = clock.monotonic_ms()
    with pytest.raises(KafkaError) as info:
        run_against(Script([ErrorCode.COORDINATOR_NOT_AVAILABLE]), clock=clock, timeout_ms=300)
    elapsed = clock.monotonic_ms() - start
    assert info.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "group 'g'" in info.value.message
    assert 300 <= elapsed < 2000
    assert sum(clock.sleeps) <= 300 + 1 and max(clock.sleeps) <= RETRY_BACKOFF_MAX_MS
    assert len(clock.sleeps) >= 5  # 5+10+20+40+80 = 155 ms of backoff fits in 300 ms


@pytest.mark.parametrize("version", [0, 3, 4])
def test_other_errors_raise_at_once_with_the_brokers_message(version):
    script = Script([ErrorCode.GROUP_AUTHORIZATION_FAILED], versions=(0, version), message="not you")
    clock = RecordingClock()
    with pytest.raises(KafkaError) as info:
        run_against(script, clock=clock)
    assert info.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert clock.sleeps == []
    assert ("not you" in info.value.message) == (version >= 1)  # v0 has no error_message


def test_an_unknown_key_type_is_a_caller_bug():
    with pytest.raises(ValueError):
        find_coordinator(Cluster("127.0.0.1:1", FAST), "g", 2)
