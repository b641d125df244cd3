"""Sans-IO Kafka codec: frames, headers, requests and responses, RecordBatch views.

Nothing in this package touches a socket, a file or an event loop (h11's rule): bytes in,
typed values out, and back.
"""

from ._client import (
    decode_response,
    encode_request,
    request_class,
    response_class,
    response_correlation_id,
    usable_version,
)
from ._entities import NO_THROTTLE, make, response_types
from ._errors import (
    CorruptRecordError,
    ErrorCode,
    FrameTooLargeError,
    InvalidRecordError,
    KafkaRecordError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    UnsupportedApiError,
)
from ._fetch_response import FetchPartitionResult, encode_fetch_response
from ._fetch_response_entries import (
    FetchEntry,
    FetchResponseEntries,
    encode_fetch_response_entries,
    fetch_error_entry,
    find_fetch_entries,
)
from ._fetch_response_scan import fetch_response_names_nodes
from ._framing import LARGE_FRAME, NEED_DATA, BufferPool, FrameReader, NeedData
from ._metadata_response import (
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
    encode_metadata_topic,
)
from ._produce_request import ProducePartitionData, ProduceRequestData, ProduceTopicData
from ._produce_request_parts import encode_produce_request_parts
from ._produce_response import ProducePartitionResult, encode_produce_response
from ._record_batch import (
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    RecordBatchHeader,
    batch_crc,
    iter_batch_headers,
    parse_batch_header,
    patch_batch,
    set_log_append_time,
    validate_batch,
    validate_produce_records,
)
from ._records import (
    MAX_RECORDS_BYTES,
    RECORDS_EXPANSION,
    Compression,
    NewRecord,
    Record,
    RecordHeader,
    RecordKey,
    build_empty_batch,
    build_record_batch,
    decode_batch_records,
    rebuild_batch,
    scan_record_keys,
)
from ._requests import Request, RequestHeader, decode_request, peek_header, request_schema
from ._responses import encode_api_versions_error, encode_response, frame_with_header
from ._throttle import with_throttle_time

__all__ = [
    "BATCH_HEADER_SIZE",
    "DELETE_HORIZON_FLAG",
    "LARGE_FRAME",
    "LOG_OVERHEAD",
    "MAX_RECORDS_BYTES",
    "NEED_DATA",
    "NO_THROTTLE",
    "RECORDS_EXPANSION",
    "BufferPool",
    "Compression",
    "CorruptRecordError",
    "ErrorCode",
    "FetchEntry",
    "FetchPartitionResult",
    "FetchResponseEntries",
    "FrameReader",
    "FrameTooLargeError",
    "InvalidRecordError",
    "KafkaRecordError",
    "LocalProtocolError",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataTopic",
    "NeedData",
    "NewRecord",
    "ProducePartitionData",
    "ProducePartitionResult",
    "ProduceRequestData",
    "ProduceTopicData",
    "ProtocolError",
    "Record",
    "RecordBatchHeader",
    "RecordHeader",
    "RecordKey",
    "RemoteProtocolError",
    "Request",
    "RequestHeader",
    "UnsupportedApiError",
    "batch_crc",
    "build_empty_batch",
    "build_record_batch",
    "decode_batch_records",
    "decode_request",
    "decode_response",
    "encode_api_versions_error",
    "encode_fetch_response",
    "encode_fetch_response_entries",
    "encode_metadata_response",
    "encode_metadata_topic",
    "encode_produce_request_parts",
    "encode_produce_response",
    "encode_request",
    "encode_response",
    "fetch_error_entry",
    "fetch_response_names_nodes",
    "find_fetch_entries",
    "frame_with_header",
    "iter_batch_headers",
    "make",
    "parse_batch_header",
    "patch_batch",
    "peek_header",
    "rebuild_batch",
    "request_class",
    "request_schema",
    "response_class",
    "response_correlation_id",
    "response_types",
    "scan_record_keys",
    "set_log_append_time",
    "usable_version",
    "validate_batch",
    "validate_produce_records",
    "with_throttle_time",
]
