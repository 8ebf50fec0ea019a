"""Kafka error codes, and the exceptions the wire codec raises.

Two kinds of failure (STYLE.md), kept apart here:

* ``ErrorCode`` is a *value* the broker puts in a response: the numbers, names and meanings of
  Kafka's ``org.apache.kafka.common.protocol.Errors``. Each member carries ``retriable`` (as
  kafka-python 3.0 classifies it, which is what the reference's section 5 table records) and a
  short default message for responses that want one.
* The exceptions below are raised by the codec. ``MalformedMessage`` and its subclasses mean the
  *peer* sent bytes that do not parse (an operating error: the server answers or closes the
  connection and keeps serving). ``EncodeError`` means *we* asked to encode something that cannot
  be put on the wire (a bug in the caller). Every exception carries ``kafka_error_code``, as the
  exceptions of ``broker.records`` do, so the server maps an exception without a table of its own.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ErrorCode",
    "WireError",
    "MalformedMessage",
    "MalformedRequest",
    "MalformedResponse",
    "UnsupportedVersion",
    "UnknownApiKey",
    "EncodeError",
]


class ErrorCode(IntEnum):
    """Kafka's error codes: ``int(code)`` is the wire value; ``.retriable``; ``.message``."""

    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool, message: str) -> "ErrorCode":
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.message = message
        return member

    UNKNOWN_SERVER_ERROR = (-1, False, "The server experienced an unexpected error.")
    NONE = (0, False, "")
    OFFSET_OUT_OF_RANGE = (1, False, "The requested offset is outside the log's range.")
    CORRUPT_MESSAGE = (2, False, "A record failed its CRC check or is otherwise corrupt.")
    UNKNOWN_TOPIC_OR_PARTITION = (3, True, "This server does not host this topic-partition.")
    INVALID_FETCH_SIZE = (4, False, "The requested fetch size is invalid.")
    LEADER_NOT_AVAILABLE = (5, True, "The partition has no leader right now (election in progress).")
    NOT_LEADER_OR_FOLLOWER = (6, True, "This server is not the leader or a follower of the partition.")
    REQUEST_TIMED_OUT = (7, True, "The request timed out.")
    BROKER_NOT_AVAILABLE = (8, False, "The broker is not available.")
    REPLICA_NOT_AVAILABLE = (9, True, "The replica is not available for the requested partition.")
    MESSAGE_TOO_LARGE = (10, False, "The record batch is larger than the server accepts.")
    STALE_CONTROLLER_EPOCH = (11, False, "The request came from a controller with an old epoch.")
    OFFSET_METADATA_TOO_LARGE = (12, False, "The committed offset's metadata string is too large.")
    NETWORK_EXCEPTION = (13, True, "The server disconnected before a response was received.")
    COORDINATOR_LOAD_IN_PROGRESS = (14, True, "The coordinator is still loading its state.")
    COORDINATOR_NOT_AVAILABLE = (15, True, "The coordinator is not available.")
    NOT_COORDINATOR = (16, True, "This server is not the coordinator for that key.")
    INVALID_TOPIC_EXCEPTION = (17, False, "The topic name is invalid or the topic is internal.")
    RECORD_LIST_TOO_LARGE = (18, False, "The request's records exceed the segment size.")
    NOT_ENOUGH_REPLICAS = (19, True, "Fewer in-sync replicas than min.insync.replicas.")
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (20, True, "Appended, but the ISR shrank below the minimum.")
    INVALID_REQUIRED_ACKS = (21, False, "acks must be -1, 0 or 1.")
    ILLEGAL_GENERATION = (22, False, "The group generation id is not current.")
    INCONSISTENT_GROUP_PROTOCOL = (23, False, "The member's protocols do not match the group's.")
    INVALID_GROUP_ID = (24, False, "The group id is invalid.")
    UNKNOWN_MEMBER_ID = (25, False, "The coordinator does not know this member id.")
    INVALID_SESSION_TIMEOUT = (26, False, "The session timeout is outside the allowed range.")
    REBALANCE_IN_PROGRESS = (27, False, "The group is rebalancing; rejoin.")
    INVALID_COMMIT_OFFSET_SIZE = (28, False, "The committed offset metadata is too large.")
    TOPIC_AUTHORIZATION_FAILED = (29, False, "Not authorized to access this topic.")
    GROUP_AUTHORIZATION_FAILED = (30, False, "Not authorized to access this group.")
    CLUSTER_AUTHORIZATION_FAILED = (31, False, "Not authorized for this cluster operation.")
    INVALID_TIMESTAMP = (32, False, "A record timestamp is outside the accepted range.")
    UNSUPPORTED_SASL_MECHANISM = (33, False, "The SASL mechanism is not supported.")
    ILLEGAL_SASL_STATE = (34, False, "The request is not valid in the current SASL state.")
    UNSUPPORTED_VERSION = (35, False, "This server does not support this request version.")
    TOPIC_ALREADY_EXISTS = (36, False, "The topic already exists.")
    INVALID_PARTITIONS = (37, False, "The number of partitions is invalid.")
    INVALID_REPLICATION_FACTOR = (38, False, "The replication factor is invalid.")
    INVALID_REPLICA_ASSIGNMENT = (39, False, "The replica assignment is invalid.")
    INVALID_CONFIG = (40, False, "A configuration value is invalid.")
    NOT_CONTROLLER = (41, True, "This server is not the controller.")
    INVALID_REQUEST = (42, False, "The request is malformed or violates the protocol.")
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, False, "Not supported by the topic's message format.")
    POLICY_VIOLATION = (44, False, "The request violates a configured policy.")
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False, "The producer sequence number is out of order.")
    DUPLICATE_SEQUENCE_NUMBER = (46, False, "The batch is a duplicate of one already written.")
    INVALID_PRODUCER_EPOCH = (47, False, "The producer epoch is older than the current one.")
    INVALID_TXN_STATE = (48, False, "The operation is invalid in the transaction's state.")
    INVALID_PRODUCER_ID_MAPPING = (49, False, "The producer id does not match the transactional id.")
    INVALID_TRANSACTION_TIMEOUT = (50, False, "The transaction timeout exceeds the maximum.")
    CONCURRENT_TRANSACTIONS = (51, True, "Another transaction operation is still completing.")
    TRANSACTION_COORDINATOR_FENCED = (52, False, "A newer transaction coordinator has taken over.")
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False, "Not authorized for this transactional id.")
    SECURITY_DISABLED = (54, False, "Security features are disabled.")
    OPERATION_NOT_ATTEMPTED = (55, False, "Not attempted because another part of the batch failed.")
    KAFKA_STORAGE_ERROR = (56, True, "Disk error while accessing the log.")
    LOG_DIR_NOT_FOUND = (57, False, "The log directory does not exist.")
    SASL_AUTHENTICATION_FAILED = (58, False, "SASL authentication failed.")
    UNKNOWN_PRODUCER_ID = (59, False, "The broker has no state for this producer id.")
    REASSIGNMENT_IN_PROGRESS = (60, False, "A partition reassignment is in progress.")
    DELEGATION_TOKEN_AUTH_DISABLED = (61, False, "Delegation token authentication is disabled.")
    DELEGATION_TOKEN_NOT_FOUND = (62, False, "The delegation token was not found.")
    DELEGATION_TOKEN_OWNER_MISMATCH = (63, False, "The principal does not own the token.")
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = (64, False, "Token requests are not allowed here.")
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = (65, False, "Not authorized for this token.")
    DELEGATION_TOKEN_EXPIRED = (66, False, "The delegation token has expired.")
    INVALID_PRINCIPAL_TYPE = (67, False, "The principal type is not supported.")
    NON_EMPTY_GROUP = (68, False, "The group is not empty.")
    GROUP_ID_NOT_FOUND = (69, False, "The group id does not exist.")
    FETCH_SESSION_ID_NOT_FOUND = (70, True, "The fetch session id was not found.")
    INVALID_FETCH_SESSION_EPOCH = (71, True, "The fetch session epoch is invalid.")
    LISTENER_NOT_FOUND = (72, True, "The leader has no endpoint for this listener.")
    TOPIC_DELETION_DISABLED = (73, False, "Topic deletion is disabled.")
    FENCED_LEADER_EPOCH = (74, True, "The leader epoch in the request is older than the broker's.")
    UNKNOWN_LEADER_EPOCH = (75, True, "The leader epoch in the request is newer than the broker's.")
    UNSUPPORTED_COMPRESSION_TYPE = (76, False, "The compression type is not supported.")
    STALE_BROKER_EPOCH = (77, False, "The broker epoch is stale.")
    OFFSET_NOT_AVAILABLE = (78, True, "The offset is not available yet (HW not caught up).")
    MEMBER_ID_REQUIRED = (79, False, "Rejoin the group with the member id provided.")
    PREFERRED_LEADER_NOT_AVAILABLE = (80, True, "The preferred leader is not available.")
    GROUP_MAX_SIZE_REACHED = (81, False, "The group has reached its maximum size.")
    FENCED_INSTANCE_ID = (82, False, "Another member with this group.instance.id has joined.")
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (83, True, "No eligible leader is available.")
    ELECTION_NOT_NEEDED = (84, True, "The leader election is not needed.")
    NO_REASSIGNMENT_IN_PROGRESS = (85, False, "No partition reassignment is in progress.")
    GROUP_SUBSCRIBED_TO_TOPIC = (86, False, "The group still subscribes to the topic.")
    INVALID_RECORD = (87, False, "A record failed validation on the broker.")
    UNSTABLE_OFFSET_COMMIT = (88, True, "There are unstable (pending transactional) offsets.")
    THROTTLING_QUOTA_EXCEEDED = (89, True, "The throttling quota has been exceeded.")
    PRODUCER_FENCED = (90, False, "A newer producer with the same transactional id exists.")
    RESOURCE_NOT_FOUND = (91, False, "The resource does not exist.")
    DUPLICATE_RESOURCE = (92, False, "The resource is given more than once.")
    UNACCEPTABLE_CREDENTIAL = (93, False, "The credential does not meet the requirements.")
    INCONSISTENT_VOTER_SET = (94, False, "The voter set is inconsistent.")
    INVALID_UPDATE_VERSION = (95, False, "The update version is invalid.")
    FEATURE_UPDATE_FAILED = (96, False, "The feature update failed.")
    PRINCIPAL_DESERIALIZATION_FAILURE = (97, False, "The principal could not be deserialized.")
    SNAPSHOT_NOT_FOUND = (98, False, "The snapshot was not found.")
    POSITION_OUT_OF_RANGE = (99, False, "The position is out of range.")
    UNKNOWN_TOPIC_ID = (100, True, "This server does not host this topic id.")
    DUPLICATE_BROKER_REGISTRATION = (101, False, "The broker id is already registered.")
    BROKER_ID_NOT_REGISTERED = (102, False, "The broker id is not registered.")
    INCONSISTENT_TOPIC_ID = (103, True, "The topic id does not match the topic name.")
    INCONSISTENT_CLUSTER_ID = (104, False, "The cluster id does not match.")
    TRANSACTIONAL_ID_NOT_FOUND = (105, False, "The transactional id was not found.")
    FETCH_SESSION_TOPIC_ID_ERROR = (106, True, "The fetch session saw inconsistent topic ids.")
    INELIGIBLE_REPLICA = (107, False, "The replica is not eligible to join the ISR.")
    NEW_LEADER_ELECTED = (108, False, "A new leader was elected; the request was not applied.")
    OFFSET_MOVED_TO_TIERED_STORAGE = (109, False, "The offset has moved to tiered storage.")
    FENCED_MEMBER_EPOCH = (110, False, "The member epoch is fenced.")
    UNRELEASED_INSTANCE_ID = (111, False, "The instance id is still in use.")
    UNSUPPORTED_ASSIGNOR = (112, False, "The assignor is not supported.")
    STALE_MEMBER_EPOCH = (113, False, "The member epoch is stale.")
    MISMATCHED_ENDPOINT_TYPE = (114, False, "The request was sent to the wrong endpoint type.")
    UNSUPPORTED_ENDPOINT_TYPE = (115, False, "The endpoint type is not supported.")
    UNKNOWN_CONTROLLER_ID = (116, False, "The controller id is unknown.")
    UNKNOWN_SUBSCRIPTION_ID = (117, False, "The subscription id is unknown.")
    TELEMETRY_TOO_LARGE = (118, False, "The telemetry payload is too large.")
    INVALID_REGISTRATION = (119, False, "The registration is invalid.")
    TRANSACTION_ABORTABLE = (120, False, "The transaction must be aborted (KIP-890).")
    INVALID_RECORD_STATE = (121, False, "The record state is invalid.")
    SHARE_SESSION_NOT_FOUND = (122, True, "The share session was not found.")
    INVALID_SHARE_SESSION_EPOCH = (123, True, "The share session epoch is invalid.")
    FENCED_STATE_EPOCH = (124, False, "The state epoch is fenced.")
    INVALID_VOTER_KEY = (125, False, "The voter key is invalid.")
    DUPLICATE_VOTER = (126, False, "The voter is already present.")
    VOTER_NOT_FOUND = (127, False, "The voter was not found.")


class WireError(Exception):
    """Base class of every exception the wire codec raises."""

    kafka_error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class MalformedMessage(WireError):
    """The bytes do not parse: a length or count larger than the bytes left, a negative length
    other than -1 (null), null where the spec forbids it, an over-long varint, invalid UTF-8,
    or bytes left over after the body.

    ``field`` names the struct and field being read ("FetchPartition.fetch_offset"),
    ``expected``/``found`` say what the reader needed and what the bytes held, ``offset`` is the
    byte position in the frame (after the 4-byte size prefix) where reading failed.
    """

    kafka_error_code = ErrorCode.INVALID_REQUEST

    def __init__(self, field: str, expected: str, found: str, offset: int) -> None:
        super().__init__(f"{field}: expected {expected}, found {found} (at byte {offset})")
        self.field = field
        self.expected = expected
        self.found = found
        self.offset = offset


class MalformedRequest(MalformedMessage):
    """A request frame from a peer does not parse. ``header`` is set when the request header
    itself parsed (so the server can log the correlation id); Kafka closes the connection on
    such requests (``InvalidRequestException``) rather than answering them."""

    def __init__(self, field: str, expected: str, found: str, offset: int, header=None) -> None:
        super().__init__(field, expected, found, offset)
        self.header = header


class MalformedResponse(MalformedMessage):
    """A response frame from a broker does not parse (client side)."""

    kafka_error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class UnsupportedVersion(WireError):
    """The request's api version is outside what the codec's spec covers. The header parsed, so
    the server can answer UNSUPPORTED_VERSION with the request's correlation id (KIP-511)."""

    kafka_error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, header, valid: tuple[int, int] | None) -> None:
        super().__init__(
            f"api key {header.api_key} version {header.api_version} is not supported"
            + (f" (valid {valid[0]}-{valid[1]})" if valid else "")
        )
        self.header = header
        self.valid = valid


class UnknownApiKey(UnsupportedVersion):
    """The request's api key has no spec at all. A subclass of UnsupportedVersion because the
    server's answer is the same: an error response keyed by the correlation id, or a close."""

    def __init__(self, header) -> None:
        super().__init__(header, None)


class EncodeError(WireError, ValueError):
    """Our own message cannot be encoded: a value out of its type's range, null in a non-nullable
    field, a string longer than 32767 bytes. A bug in the caller, never the peer's fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
