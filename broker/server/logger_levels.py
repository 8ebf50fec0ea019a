"""Log levels changed at runtime (KIP-412): the BROKER_LOGGER (8) config resource of
DescribeConfigs and IncrementalAlterConfigs, Kafka's ``LoggingController`` and
``RuntimeLoggerManager`` over Python's ``logging``.

A broker's loggers are the root logger (``root``, as Kafka names it) and every logger its
modules created (``logging.Logger.manager.loggerDict``, e.g. ``broker.server.network``); each is
described with its *effective* level in Kafka's names, as Kafka resolves a logger without a level
through its ancestors. Levels map onto Python's: FATAL -> CRITICAL, WARN -> WARNING, TRACE -> 5
(below DEBUG); ERROR, INFO and DEBUG keep their names. SET gives a logger its own level, DELETE
takes it away (it inherits again; not for the root logger); APPEND and SUBTRACT are refused.
Changes live in the process only (Kafka's do not survive a restart either): nothing is written
to ZooKeeper. Errors use Kafka 4.1's words and codes: an unknown logger or level
INVALID_CONFIG (40), the rest INVALID_REQUEST (42).
"""

from __future__ import annotations

import logging
from typing import Iterable

from broker.wire import ErrorCode

__all__ = ["RESOURCE_BROKER_LOGGER", "ROOT_LOGGER", "VALID_LOG_LEVELS", "LoggerLevelError", "loggers",
           "check_node", "validate", "apply"]

RESOURCE_BROKER_LOGGER = 8
ROOT_LOGGER = "root"
TRACE = 5  # Python has no TRACE; below DEBUG as in log4j
_PYTHON_LEVEL = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
                 "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
VALID_LOG_LEVELS = tuple(sorted(_PYTHON_LEVEL))  # Kafka lists them sorted in its message
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


class LoggerLevelError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code, self.message = error_code, message


def kafka_level(level: int) -> str:
    """The Kafka name of a Python level: the most severe Kafka level it reaches."""
    for name, number in sorted(_PYTHON_LEVEL.items(), key=lambda item: -item[1]):
        if level >= number:
            return name
    return "TRACE"


def _existing(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    logger = logging.Logger.manager.loggerDict.get(name)
    return logger if isinstance(logger, logging.Logger) else None  # not a PlaceHolder


def loggers() -> dict[str, str]:
    """Every logger of the process with its effective level, in Kafka's names."""
    found = {ROOT_LOGGER: kafka_level(logging.getLogger().level)}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            found[name] = kafka_level(logger.getEffectiveLevel())
    return found


def check_node(resource_name: str, broker_id: int) -> None:
    """A BROKER_LOGGER resource names the broker that answers (Kafka's ``validateResourceNameIsNodeId``)."""
    try:
        requested = int(resource_name)
    except ValueError:
        raise LoggerLevelError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != broker_id:
        raise LoggerLevelError(ErrorCode.INVALID_REQUEST,
                               f"Unexpected node id. Expected {broker_id}, but received {requested}")


def validate(ops: Iterable[tuple[str, int, str | None]]) -> None:
    """Every (logger, operation, level) as Kafka's ``validateLogLevelConfigs``; nothing applied."""
    ops = list(ops)
    nulls = [name for name, op, value in ops if op != OP_DELETE and value is None]
    if nulls:
        raise LoggerLevelError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    for name, op, value in ops:
        if op in (OP_SET, OP_DELETE) and _existing(name) is None:
            raise LoggerLevelError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == OP_SET and value not in _PYTHON_LEVEL:
            raise LoggerLevelError(ErrorCode.INVALID_CONFIG,
                                   f"Cannot set the log level of {name} to {value} as it is not a supported log "
                                   f"level. Valid log levels are {', '.join(VALID_LOG_LEVELS)}")
        elif op == OP_DELETE and name == ROOT_LOGGER:
            raise LoggerLevelError(ErrorCode.INVALID_REQUEST,
                                   f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        elif op in _OP_NAMES:
            raise LoggerLevelError(ErrorCode.INVALID_REQUEST,
                                   f"{_OP_NAMES[op]} operation is not allowed for the BROKER_LOGGER resource")
        elif op not in (OP_SET, OP_DELETE):
            raise LoggerLevelError(ErrorCode.INVALID_REQUEST,
                                   f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")


def apply(ops: Iterable[tuple[str, int, str | None]]) -> None:
    """Set or unset the levels (after ``validate``); logged at WARNING, as Kafka logs them."""
    for name, op, value in ops:
        logger = _existing(name)
        if op == OP_SET:
            logger.setLevel(_PYTHON_LEVEL[value])
            logging.getLogger(__name__).warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)
            logging.getLogger(__name__).warning("Unset the log level of %s", name)
