"""broker.wire.codec and the spec machinery: compiled once per (struct, version), fixed-width
fields fused, array bounds derived from the spec, and bad specs refused at import time."""

from __future__ import annotations

import pytest

import broker.wire as wire
from broker.wire.api import api
from broker.wire.codec import decoder_source, encoder_source, size_min, struct_decoder, struct_encoder
from broker.wire.schema import INT16, INT32, INT64, RECORDS, STRING, UUID, array, field, struct

PARTITION_DATA = wire.FetchResponse.PartitionData._struct
PRODUCE_REQUEST = wire.ProduceRequest._struct


def test_codecs_are_compiled_once_per_struct_and_version():
    assert struct_decoder(PARTITION_DATA, 12, True) is struct_decoder(PARTITION_DATA, 12, True)
    assert struct_encoder(PARTITION_DATA, 12, True) is struct_encoder(PARTITION_DATA, 12, True)
    assert struct_decoder(PARTITION_DATA, 12, True) is not struct_decoder(PARTITION_DATA, 11, False)


def test_fixed_width_fields_are_fused_into_one_bounds_check_and_unpack():
    source = decoder_source(PARTITION_DATA, 12, True)
    # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset: 30 bytes.
    assert "if end - pos < 30:" in source
    assert ("obj.partition_index, obj.error_code, obj.high_watermark, obj.last_stable_offset, "
            "obj.log_start_offset = unpack") in source
    assert source.count("unpack") == 2  # that run, then preferred_read_replica
    encoded = encoder_source(PARTITION_DATA, 12, True)
    assert "(obj.partition_index, obj.error_code, obj.high_watermark, obj.last_stable_offset, " \
           "obj.log_start_offset))" in encoded


def test_version_specific_layouts_differ_where_the_spec_says():
    v3 = decoder_source(PRODUCE_REQUEST, 3, False)
    v2 = decoder_source(PRODUCE_REQUEST, 2, False)
    assert "obj.transactional_id, pos = read" in v3
    assert "obj.transactional_id = default" in v2  # absent in v2: takes its default


@pytest.mark.parametrize(
    "stype, version, flexible, expected",
    [
        pytest.param(PARTITION_DATA, 4, False, 4 + 2 + 8 + 8 + 4 + 4, id="fetch-partition-v4"),
        pytest.param(PARTITION_DATA, 12, True, 4 + 2 + 8 + 8 + 8 + 1 + 4 + 1 + 1, id="fetch-partition-v12"),
        pytest.param(wire.MetadataRequest.MetadataRequestTopic._struct, 10, True, 16 + 1 + 1, id="metadata-topic-v10"),
    ],
)
def test_item_size_min_bounds_array_counts(stype, version, flexible, expected):
    assert size_min(stype, version, flexible) == expected


def test_generated_classes_cover_all_versions_and_document_their_fields():
    fields = [f.name for f in PARTITION_DATA.fields]
    assert fields[:3] == ["partition_index", "error_code", "high_watermark"]
    assert "records: records (0+, nullable 0+)" in wire.FetchResponse.PartitionData.__doc__
    assert wire.FetchResponse.PartitionData.__qualname__ == "FetchResponse.PartitionData"


def test_message_dict_round_trip_and_repr():
    response = wire.FetchResponse(responses=[wire.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[wire.FetchResponse.PartitionData(records=memoryview(b"abc"))])])
    as_dict = response.to_dict()
    assert as_dict["responses"][0]["partitions"][0]["records"] == b"abc"
    assert wire.FetchResponse.from_dict(as_dict) == response
    assert "<3 bytes>" in repr(response)


@pytest.mark.parametrize(
    "build, message",
    [
        pytest.param(lambda: field("x", STRING, "0+", default=None), "never nullable", id="null-default"),
        pytest.param(lambda: field("x", STRING, "3+", nullable="0+"), "nullable outside", id="nullable-range"),
        pytest.param(lambda: struct("S", field("a", INT32, "0+"), field("a", INT64, "1+")), "duplicate", id="dup"),
        pytest.param(lambda: api(99, "Bad", valid="0-3", flexible="2+",
                                 request=[field("t", INT16, "0+", tag=0)], response=[]),
                     "tagged when not flexible", id="tag-outside-flexible"),
        pytest.param(lambda: api(98, "Bad", valid="0-3", flexible="2+",
                                 request=[field("a", INT16, "2+", tag=0), field("b", UUID, "2+", tag=0)],
                                 response=[]),
                     "tag 0 used by", id="tag-reused"),
        pytest.param(lambda: api(97, "Bad", valid="0", flexible="none",
                                 request=[field("to_dict", RECORDS, "0+")], response=[]),
                     "collides", id="reserved-name"),
    ],
)
def test_bad_specs_are_refused(build, message):
    with pytest.raises(AssertionError, match=message):
        build()


def test_a_new_api_spec_is_a_few_declarative_lines():
    echo = api(
        1000, "Echo", valid="0-1", flexible="1+",
        request=[field("payloads", array(STRING), "0+"), field("note", STRING, "1+", nullable="1+", tag=0)],
        response=[field("payloads", array(STRING), "0+")],
    )
    request = echo.request_class(payloads=["a", "b"], note="n")
    chunks: list = []
    struct_encoder(echo.request, 1, True)(request, chunks)
    body = b"".join(chunks)
    assert body == b"\x03\x02a\x02b" + b"\x01\x00\x02\x02n"
    decoded, end = struct_decoder(echo.request, 1, True)(memoryview(body), 0)
    assert decoded == request and end == len(body)
