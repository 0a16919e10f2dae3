"""The API client's HTTP/1.1 response parser: whole answers, answers split anywhere, several in one read."""

from __future__ import annotations

import pytest

from kopf_scheduler.edge.client import ResponseParser

BY_LENGTH = b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"kind":"Ev"}'
CHUNKED = (
    b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n3;ext=1\r\n 1}\r\n0\r\nX-Trailer: t\r\n\r\n'
)
CLOSING = b"HTTP/1.1 409 Conflict\r\ncontent-length: 2\r\nConnection: close\r\n\r\n{}"
NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n" + BY_LENGTH
OLD = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        pytest.param(BY_LENGTH, [(201, b'{"kind":"Ev"}', True)], id="a body by Content-Length"),
        pytest.param(CHUNKED, [(200, b'{"a": 1}', True)], id="chunked, with a chunk extension and a trailer"),
        pytest.param(CLOSING, [(409, b"{}", False)], id="Connection: close ends keep-alive"),
        pytest.param(NO_CONTENT, [(204, b"", True)], id="204 has no body"),
        pytest.param(CONTINUE, [(201, b'{"kind":"Ev"}', True)], id="a 100 Continue is skipped"),
        pytest.param(OLD, [(200, b"", False)], id="HTTP/1.0 closes unless told otherwise"),
        pytest.param(
            BY_LENGTH + CHUNKED, [(201, b'{"kind":"Ev"}', True), (200, b'{"a": 1}', True)], id="two answers in one read"
        ),
    ],
)
def test_whole_and_split_answers(wire: bytes, expected: list[tuple[int, bytes, bool]]) -> None:
    assert ResponseParser().feed(wire) == expected
    for cut in range(1, len(wire)):  # every split point gives the same answers, and only at the end
        parser = ResponseParser()
        first = parser.feed(wire[:cut])
        assert first + parser.feed(wire[cut:]) == expected
    byte_by_byte = ResponseParser()
    got = [r for i in range(len(wire)) for r in byte_by_byte.feed(wire[i : i + 1])]
    assert got == expected and byte_by_byte.idle


def test_idle_until_the_first_byte_of_an_answer() -> None:
    parser = ResponseParser()
    assert parser.idle
    parser.feed(b"HTTP/1.1 2")
    assert not parser.idle


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", id="not HTTP"),
        pytest.param(b"HTTP/1.1 2xx Odd\r\n\r\n", id="a status that is not a number"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", id="a chunk size that is not hex"),
    ],
)
def test_malformed_answers_raise_value_error(wire: bytes) -> None:
    with pytest.raises(ValueError):
        ResponseParser().feed(wire)
