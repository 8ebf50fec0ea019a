"""The ``kafka.*`` options, turned into ``broker.client`` Consumer and Producer keyword arguments. Pure.

Spark's Kafka connector hands every ``kafka.``-prefixed option to its Kafka clients; pylog's
clients take keyword arguments instead, so this module maps the ones they understand (security
options through ``broker.client.security``), refuses those that would change what the source or
sink guarantees (with the option to use instead), and warns about the rest. Split from
``spark_log.options``, which calls ``consumer_settings`` and ``producer_settings``, to keep both
small.
"""

from __future__ import annotations

from spark_log.option_values import INT32_MAX, OptionError, bool_option, int_option

__all__ = ["COMPRESSION_TYPES", "kafka_params", "consumer_settings", "producer_settings"]

_UNSUPPORTED_CONSUMER = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' "
                         "instead; the source decides which offsets are read, and a restarted "
                         "streaming query resumes from its checkpoint",
    "key.deserializer": "keys are always read as bytes; deserialize them with DataFrame operations",
    "value.deserializer": "values are always read as bytes; deserialize them with DataFrame operations",
    "enable.auto.commit": "the source never commits through the consumer; use 'offsets.store' "
                          "('kafka' or 'zookeeper') with 'kafka.group.id' to publish consumed offsets",
    "interceptor.classes": "interceptors are not supported",
}
_UNSUPPORTED_PRODUCER = {
    "key.serializer": "keys are written as bytes; cast the key column to string or binary",
    "value.serializer": "values are written as bytes; cast the value column to string or binary",
    "transactional.id": "set 'deliveryGuarantee' to 'exactly-once' instead: the sink gives each task "
                        "its own transactional id (prefix: option 'transactionalIdPrefix')",
}


def kafka_params(opts: dict) -> dict[str, str]:
    params = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if "isolation.level" in opts:  # the unprefixed name; kafka.isolation.level wins
        params.setdefault("isolation.level", opts["isolation.level"])
    return params


def _security_settings(params: dict) -> dict:
    """``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*`` as Spark's Kafka connector
    passes them to its clients: ``{"config": ClientConfig(security=...)}`` for the client kwargs
    (picklable; ``broker.client.security``), or nothing for PLAINTEXT."""
    from broker.client.config import ClientConfig
    from broker.client.security import SECURITY_PROPERTY_NAMES, client_security

    props = {key: value for key, value in params.items() if key in SECURITY_PROPERTY_NAMES}
    if not props:
        return {}
    try:
        security = client_security(props)
    except (ValueError, OSError) as exc:  # OSError: an unreadable truststore/keystore file
        raise OptionError(f"Kafka security options: {exc}") from None
    return {"config": ClientConfig(security=security)} if security is not None else {}


def _is_security(key: str) -> bool:
    from broker.client.security import SECURITY_PROPERTY_NAMES
    return key in SECURITY_PROPERTY_NAMES


def consumer_settings(opts: dict) -> tuple[dict, str | None, list[str]]:
    """kafka.* to ``broker.client.Consumer`` keyword arguments (and the group id)."""
    params = kafka_params(opts)
    settings: dict[str, object] = _security_settings(params)
    warnings: list[str] = []
    for key, value in params.items():
        if key in _UNSUPPORTED_CONSUMER:
            raise OptionError(f"Kafka option 'kafka.{key}' is not supported: {_UNSUPPORTED_CONSUMER[key]}")
    for key, value in params.items():
        if key in ("bootstrap.servers", "group.id") or _is_security(key):
            continue
        if key == "isolation.level":
            if value not in ("read_uncommitted", "read_committed"):
                raise OptionError(f"Option 'kafka.isolation.level' must be 'read_uncommitted' or "
                                  f"'read_committed', got {value!r}")
            settings["isolation_level"] = value
        elif key in _CONSUMER_INTS:
            name, minimum = _CONSUMER_INTS[key]
            settings[name] = int_option(opts, f"kafka.{key}", minimum=minimum, maximum=INT32_MAX)
        elif key == "check.crcs":
            settings["check_crcs"] = bool_option(opts, "kafka.check.crcs", True)
        elif key == "client.id":
            settings["client_id"] = value
        else:
            warnings.append(f"Kafka option 'kafka.{key}' is not used by the pylog source")
    group_id = params.get("group.id")
    if group_id is not None:
        warnings.append("'kafka.group.id' is set: concurrent queries with the same group id may "
                        "interfere with each other's committed offsets")
    return settings, group_id, warnings


_CONSUMER_INTS = {
    "fetch.max.wait.ms": ("fetch_max_wait_ms", 0),
    "fetch.min.bytes": ("fetch_min_bytes", 0),
    "fetch.max.bytes": ("fetch_max_bytes", 1),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", 1),
    "request.timeout.ms": ("request_timeout_ms", 1),
}


_PRODUCER_INTS = {
    "linger.ms": ("linger_ms", 0),
    "batch.size": ("batch_bytes_max", 1),
    "max.request.size": ("request_bytes_max", 1),
    "buffer.memory": ("buffer_bytes_max", 1),
    "retries": ("retries", 0),
    "delivery.timeout.ms": ("delivery_timeout_ms", 1),
    "request.timeout.ms": ("request_timeout_ms", 1),
    "max.block.ms": ("max_block_ms", 0),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests", 1),
}
COMPRESSION_TYPES = ("none", "gzip", "lz4")


def producer_settings(opts: dict) -> tuple[dict, list[str]]:
    params = kafka_params(opts)
    settings: dict[str, object] = _security_settings(params)
    warnings: list[str] = []
    for key in params:
        if key in _UNSUPPORTED_PRODUCER:
            raise OptionError(f"Kafka option 'kafka.{key}' is not supported: {_UNSUPPORTED_PRODUCER[key]}")
    for key, value in params.items():
        if key == "bootstrap.servers" or _is_security(key):
            continue
        if key == "acks":
            acks = value.strip().lower()
            if acks not in ("all", "-1", "0", "1"):
                raise OptionError(f"Option 'kafka.acks' must be 'all', '-1', '0' or '1', got {value!r}")
            settings["acks"] = -1 if acks in ("all", "-1") else int(acks)
        elif key == "compression.type":
            codec = value.strip().lower()
            if codec not in COMPRESSION_TYPES:
                raise OptionError(f"Option 'kafka.compression.type' must be one of "
                                  f"{', '.join(COMPRESSION_TYPES)}, got {value!r}")
            settings["compression"] = codec
        elif key == "enable.idempotence":
            settings["enable_idempotence"] = bool_option(opts, "kafka.enable.idempotence", True)
        elif key in _PRODUCER_INTS:
            name, minimum = _PRODUCER_INTS[key]
            settings[name] = int_option(opts, f"kafka.{key}", minimum=minimum, maximum=INT32_MAX)
        elif key == "client.id":
            settings["client_id"] = value
        else:
            warnings.append(f"Kafka option 'kafka.{key}' is not used by the pylog sink")
    # Kafka 3: idempotence is on by default, but only when acks=all; it is an error to ask for it
    # explicitly with other acks.
    if settings.get("acks", -1) != -1:
        if settings.get("enable_idempotence") is True:
            raise OptionError("Option 'kafka.enable.idempotence' = 'true' needs 'kafka.acks' = 'all'")
        settings["enable_idempotence"] = False
    return settings, warnings
