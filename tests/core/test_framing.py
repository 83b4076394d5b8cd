"""FrameReader, frame and frame_many against the wire format, plus a stateful model of a TCP stream."""
from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bunqueue._core.framing import DEFAULT_MAX_FRAME, FrameReader, FrameTooLarge, frame, frame_many


def wire(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_frame_prefixes_big_endian_length():
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(b"x" * 70000) == wire(b"x" * 70000)


def test_frame_accepts_any_byte_buffer():
    assert frame(bytearray(b"ab")) == wire(b"ab")
    assert frame(memoryview(b"abcd")[1:3]) == wire(b"bc")
    with pytest.raises(TypeError):
        frame("text")


def test_frame_many_concatenates_frames():
    payloads = [b"a", b"", b"hello", bytes(range(256))]
    assert frame_many(payloads) == b"".join(wire(p) for p in payloads)
    assert frame_many(iter(payloads)) == frame_many(tuple(payloads)) == frame_many(payloads)
    assert frame_many([]) == b""
    with pytest.raises(TypeError):
        frame_many([b"ok", 5])


def test_default_max_frame_is_64_mib():
    assert DEFAULT_MAX_FRAME == 64 * 1024 * 1024


def test_feed_splits_many_frames_in_one_chunk():
    payloads = [bytes([i]) * i for i in range(200)]
    reader = FrameReader()
    assert reader.feed(frame_many(payloads)) == payloads
    assert reader.buffered == 0


def test_feed_keeps_partial_frame_until_complete():
    reader = FrameReader()
    data = wire(b"first") + wire(b"second")
    assert reader.feed(data[:2]) == []
    assert reader.buffered == 2
    assert reader.feed(data[2:11]) == [b"first"]
    assert reader.buffered == 2
    assert reader.feed(data[11:]) == [b"second"]
    assert reader.buffered == 0


def test_feed_byte_by_byte():
    payloads = [b"", b"a", b"bc", b""]
    data = frame_many(payloads)
    reader = FrameReader()
    out = []
    for i in range(len(data)):
        out += reader.feed(data[i : i + 1])
    assert out == payloads
    assert reader.buffered == 0


def test_zero_length_frame_is_a_frame():
    reader = FrameReader()
    assert reader.feed(b"\x00\x00\x00\x00") == [b""]
    assert reader.feed(b"") == []
    assert reader.buffered == 0


def test_big_frame_in_many_chunks_returns_once():
    payload = bytes(range(256)) * 4096
    data = wire(payload) + wire(b"tail")
    reader = FrameReader()
    out = []
    for start in range(0, len(data), 1000):
        out += reader.feed(data[start : start + 1000])
        if not out:
            assert reader.buffered == min(start + 1000, 4 + len(payload))
    assert out == [payload, b"tail"]
    assert reader.buffered == 0


def test_feed_accepts_bytearray_and_memoryview():
    reader = FrameReader()
    data = wire(b"abc") + wire(b"de")
    assert reader.feed(bytearray(data[:5])) == []
    assert reader.feed(memoryview(data)[5:]) == [b"abc", b"de"]


def test_frame_of_exactly_max_frame_is_accepted():
    reader = FrameReader(max_frame=3)
    assert reader.feed(wire(b"abc")) == [b"abc"]


def test_oversized_header_raises_before_any_body():
    reader = FrameReader(max_frame=10)
    with pytest.raises(FrameTooLarge) as caught:
        reader.feed(struct.pack(">I", 11))
    assert caught.value.length == 11
    assert caught.value.max_frame == 10
    assert caught.value.frames == []
    assert isinstance(caught.value, ValueError)
    assert "11" in str(caught.value)


def test_oversized_header_keeps_frames_completed_before_it():
    reader = FrameReader(max_frame=10)
    with pytest.raises(FrameTooLarge) as caught:
        reader.feed(wire(b"ok") + wire(b"") + struct.pack(">I", 2**32 - 1) + b"junk")
    assert caught.value.frames == [b"ok", b""]
    assert caught.value.length == 2**32 - 1


def test_oversized_header_split_across_chunks():
    reader = FrameReader(max_frame=10)
    assert reader.feed(wire(b"a") + b"\x00\x00") == [b"a"]
    assert reader.buffered == 2
    with pytest.raises(FrameTooLarge) as caught:
        reader.feed(b"\x01\x00")
    assert caught.value.length == 256
    assert caught.value.frames == []


def test_reader_stays_failed_after_oversized_header():
    reader = FrameReader(max_frame=1)
    with pytest.raises(FrameTooLarge):
        reader.feed(wire(b"too big"))
    assert reader.buffered == 0
    with pytest.raises(FrameTooLarge) as caught:
        reader.feed(wire(b"a"))
    assert caught.value.length == 7
    assert caught.value.frames == []


def test_frame_too_large_pickles():
    error = pickle.loads(pickle.dumps(FrameTooLarge(99, 10, [b"x"])))
    assert (error.length, error.max_frame, error.frames) == (99, 10, [b"x"])


def test_negative_max_frame_is_refused():
    with pytest.raises(ValueError):
        FrameReader(max_frame=-1)


def test_feed_refuses_non_buffers():
    with pytest.raises(TypeError):
        FrameReader().feed("text")


MAX_FRAME = 64


class StreamMachine(RuleBasedStateMachine):
    """The reader against a model stream: frames come out exactly when their last byte is delivered."""

    def __init__(self):
        super().__init__()
        self.reader = FrameReader(max_frame=MAX_FRAME)
        self.stream = bytearray()
        self.sent: list[bytes] = []
        self.frame_ends: list[int] = []
        self.delivered = 0
        self.received: list[bytes] = []
        # Stream offset where the 4 bytes of an oversized header end, once one was sent.
        self.bad_header_end: int | None = None
        self.failed = False

    def complete_frames(self, upto: int) -> int:
        return sum(1 for end in self.frame_ends if end <= upto)

    @precondition(lambda self: self.bad_header_end is None)
    @rule(payload=st.binary(max_size=MAX_FRAME))
    def send(self, payload):
        self.stream += wire(payload)
        self.sent.append(payload)
        self.frame_ends.append(len(self.stream))

    @precondition(lambda self: self.bad_header_end is None)
    @rule(length=st.integers(MAX_FRAME + 1, 2**32 - 1), junk=st.binary(max_size=8))
    def send_oversized(self, length, junk):
        self.stream += struct.pack(">I", length) + junk
        self.bad_header_end = len(self.stream) - len(junk)

    @rule(data=st.data(), kind=st.sampled_from([bytes, bytearray, memoryview]))
    def deliver(self, data, kind):
        size = data.draw(st.integers(0, len(self.stream) - self.delivered), label="size")
        start, end = self.delivered, self.delivered + size
        chunk = kind(bytes(self.stream[start:end]))
        self.delivered = end
        must_fail = self.failed or (self.bad_header_end is not None and end >= self.bad_header_end)
        if not must_fail:
            self.received += self.reader.feed(chunk)
            return
        with pytest.raises(FrameTooLarge) as caught:
            self.reader.feed(chunk)
        expected = [] if self.failed else self.sent[len(self.received) : self.complete_frames(end)]
        assert caught.value.frames == expected
        self.received += caught.value.frames
        self.failed = True

    @invariant()
    def frames_match_the_stream(self):
        if self.failed:
            assert self.reader.buffered == 0
            return
        done = self.complete_frames(self.delivered)
        assert self.received == self.sent[:done]
        boundary = self.frame_ends[done - 1] if done else 0
        assert self.reader.buffered == self.delivered - boundary


StreamMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestStream = StreamMachine.TestCase
