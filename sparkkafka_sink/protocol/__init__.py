"""Sans-I/O Kafka wire protocol: bytes in, objects out; no sockets here.

The network layer frames bytes with ``FrameReader``, adds headers with ``encode_request`` /
``decode_response_header`` and hands bodies to the message classes re-exported below.
"""

from __future__ import annotations

from sparkkafka_sink.protocol.api import (  # noqa: F401
    FLEXIBLE_FROM,
    SUPPORTED_VERSIONS,
    ApiKey,
    check_version,
    is_flexible,
    negotiate,
)
from sparkkafka_sink.protocol.api_versions import (  # noqa: F401
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from sparkkafka_sink.protocol.errors import (  # noqa: F401
    ERROR_CLASSES,
    error_for_code,
    is_retriable,
    needs_metadata_refresh,
)
from sparkkafka_sink.protocol.framing import FrameReader  # noqa: F401
from sparkkafka_sink.protocol.header import (  # noqa: F401
    decode_response_header,
    encode_request,
)
from sparkkafka_sink.protocol.init_producer_id import (  # noqa: F401
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from sparkkafka_sink.protocol.metadata import (  # noqa: F401
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from sparkkafka_sink.protocol.primitives import Reader, Writer  # noqa: F401
from sparkkafka_sink.protocol.produce import (  # noqa: F401
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
