"""FrameReader and frame_many against the bytearray-and-struct baseline."""
from __future__ import annotations

import random

import pytest
from baselines import PyFrameReader, py_frame, py_frame_many

from bunqueue._core.framing import FrameReader, frame, frame_many

READERS = {"compiled": FrameReader, "baseline": PyFrameReader}
FRAME_MANY = {"compiled": frame_many, "baseline": py_frame_many}
FRAME = {"compiled": frame, "baseline": py_frame}
IMPLS = pytest.mark.parametrize("impl", ["compiled", "baseline"])

_rng = random.Random(7)
SMALL_PAYLOADS = [_rng.randbytes(_rng.randrange(32, 256)) for _ in range(10_000)]
SMALL_STREAM = frame_many(SMALL_PAYLOADS)
BIG_PAYLOAD = _rng.randbytes(8 * 1024 * 1024)
BIG_CHUNKS = [frame(BIG_PAYLOAD)[i : i + 65536] for i in range(0, len(BIG_PAYLOAD) + 4, 65536)]


def tcp_chunks(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    chunks, pos = [], 0
    while pos < len(data):
        size = rng.choice([1460, 4096, 16384, 65536])
        chunks.append(data[pos : pos + size])
        pos += size
    return chunks


SMALL_STREAM_CHUNKS = tcp_chunks(SMALL_STREAM, 1)


@IMPLS
@pytest.mark.benchmark(group="framing: 10k small frames in one chunk")
def test_feed_many_small_frames(benchmark, impl):
    reader = READERS[impl]()
    frames = benchmark(reader.feed, SMALL_STREAM)
    assert len(frames) == len(SMALL_PAYLOADS)


@IMPLS
@pytest.mark.benchmark(group="framing: 10k small frames in TCP-sized chunks")
def test_feed_small_frames_in_chunks(benchmark, impl):
    def run():
        reader = READERS[impl]()
        return sum(len(reader.feed(chunk)) for chunk in SMALL_STREAM_CHUNKS)

    assert benchmark(run) == len(SMALL_PAYLOADS)


@IMPLS
@pytest.mark.benchmark(group="framing: one 8 MiB frame in 64 KiB chunks")
def test_feed_big_frame_in_chunks(benchmark, impl):
    def run():
        reader = READERS[impl]()
        out = []
        for chunk in BIG_CHUNKS:
            out += reader.feed(chunk)
        return out

    frames = benchmark(run)
    assert len(frames) == 1 and len(frames[0]) == len(BIG_PAYLOAD)


@IMPLS
@pytest.mark.benchmark(group="framing: frame_many of 10k payloads")
def test_frame_many(benchmark, impl):
    assert len(benchmark(FRAME_MANY[impl], SMALL_PAYLOADS)) == len(SMALL_STREAM)


@IMPLS
@pytest.mark.benchmark(group="framing: frame one 128-byte payload")
def test_frame_one(benchmark, impl):
    payload = SMALL_PAYLOADS[0][:128]
    assert len(benchmark(FRAME[impl], payload)) == len(payload) + 4
