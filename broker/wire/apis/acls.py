"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the ACL admin APIs (KIP-140; pattern
types from v1, KIP-290). v2 is flexible; v3 adds nothing on the wire (USER resources, KIP-554).
Enums travel as int8 codes (``broker.auth.acl``)."""

from broker.wire.api import api
from broker.wire.schema import INT8, INT16, INT32, STRING, array, field, struct


def _filter_fields():
    return (
        field("resource_type_filter", INT8, "0+"),
        field("resource_name_filter", STRING, "0+", nullable="0+"),
        field("pattern_type_filter", INT8, "1+", default=3),
        field("principal_filter", STRING, "0+", nullable="0+"),
        field("host_filter", STRING, "0+", nullable="0+"),
        field("operation", INT8, "0+"),
        field("permission_type", INT8, "0+"),
    )


DESCRIBE_ACLS = api(
    29,
    "DescribeAcls",
    valid="0-3",
    flexible="2+",
    request=list(_filter_fields()),
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+", default=None),
        field("resources", array(struct(
            "DescribeAclsResource",
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("pattern_type", INT8, "1+", default=3),
            field("acls", array(struct(
                "AclDescription",
                field("principal", STRING, "0+"),
                field("host", STRING, "0+"),
                field("operation", INT8, "0+"),
                field("permission_type", INT8, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

CREATE_ACLS = api(
    30,
    "CreateAcls",
    valid="0-3",
    flexible="2+",
    request=[
        field("creations", array(struct(
            "AclCreation",
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("resource_pattern_type", INT8, "1+", default=3),
            field("principal", STRING, "0+"),
            field("host", STRING, "0+"),
            field("operation", INT8, "0+"),
            field("permission_type", INT8, "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct(
            "AclCreationResult",
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+", default=None),
        )), "0+"),
    ],
)

DELETE_ACLS = api(
    31,
    "DeleteAcls",
    valid="0-3",
    flexible="2+",
    request=[
        field("filters", array(struct("DeleteAclsFilter", *_filter_fields())), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("filter_results", array(struct(
            "DeleteAclsFilterResult",
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+", default=None),
            field("matching_acls", array(struct(
                "DeleteAclsMatchingAcl",
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable="0+", default=None),
                field("resource_type", INT8, "0+"),
                field("resource_name", STRING, "0+"),
                field("pattern_type", INT8, "1+", default=3),
                field("principal", STRING, "0+"),
                field("host", STRING, "0+"),
                field("operation", INT8, "0+"),
                field("permission_type", INT8, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

DescribeAclsRequest = DESCRIBE_ACLS.request_class
DescribeAclsResponse = DESCRIBE_ACLS.response_class
CreateAclsRequest = CREATE_ACLS.request_class
CreateAclsResponse = CREATE_ACLS.response_class
DeleteAclsRequest = DELETE_ACLS.request_class
DeleteAclsResponse = DELETE_ACLS.response_class
