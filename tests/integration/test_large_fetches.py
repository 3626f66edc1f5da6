"""A fetch answer larger than the socket takes at once: the broker sends what the socket takes
with sendfile straight away and the rest as the client reads, and every byte arrives in order."""

import os
import socket

from log.batches import make_batch, record_values
from raw_protocol import NONE, RawClient, assert_healthy, create_topic, fetch, produce

from weir.broker.connection import SENDFILE_MIN_BYTES


def test_a_fetch_answer_larger_than_the_socket_buffers_arrives_whole(broker):
    values = [os.urandom(200 * 1024) for _ in range(48)]  # 9.4 MiB: beyond tcp_wmem's 4 MiB and the receive window
    with RawClient(broker.port) as client:
        create_topic(client, "large")
        for value in values:
            assert produce(client, "large", make_batch([value])).error_code == NONE
    with RawClient(broker.port) as reader:
        reader.sock.close()  # again, with a small receive window from the start
        reader.sock = socket.socket()
        reader.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        reader.sock.settimeout(30)
        reader.sock.connect(("127.0.0.1", broker.port))
        answer = fetch(reader, "large", 0)
        assert answer.error_code == NONE and len(answer.records) > SENDFILE_MIN_BYTES
        assert record_values(answer.records) == list(enumerate(values))[:len(record_values(answer.records))]
        assert len(record_values(answer.records)) >= 40, "the answer holds most of the 10 MiB asked for"
        # the connection goes on: the next answer follows the large one, not inside it
        assert record_values(fetch(reader, "large", 47).records) == [(47, values[47])]
    assert_healthy(broker)
