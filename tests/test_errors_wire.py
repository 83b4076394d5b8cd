"""Wire constants have one home (bunqueue.errors), and the compiled modules agree with it."""
from __future__ import annotations

import msgpack
import pytest

from bunqueue import errors
from bunqueue._core import framing
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import wire_number
from bunqueue._core.packer import ReplyPacker
from bunqueue.server import codec


def test_frame_limit_and_frame_errors_live_in_errors() -> None:
    assert framing.DEFAULT_MAX_FRAME == errors.MAX_FRAME_BYTES == 64 * 1024 * 1024
    assert framing.FrameTooLarge is errors.FrameTooLarge
    assert codec.BadFrame is errors.BadFrame
    assert framing.FrameReader().feed(b"") == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float(errors.INT32_MIN), errors.INT32_MIN),
        (float(errors.UINT32_MAX), errors.UINT32_MAX),
        (float(errors.INT32_MIN - 1), float(errors.INT32_MIN - 1)),
        (float(errors.UINT32_MAX + 1), float(errors.UINT32_MAX + 1)),
        (0.5, 0.5),
    ],
)
def test_integers_go_out_as_integers_only_inside_int32_to_uint32(value: float, expected: object) -> None:
    """jobs.wire_number and the packer's job fields read the same bounds from _core/wire.pxd."""
    out = wire_number(value)
    assert out == expected and type(out) is type(expected)
    job = JobFactory().build({"timestamp": value}, "q", 0.0, False)
    packed = msgpack.unpackb(ReplyPacker().pack(job), raw=False)["createdAt"]
    assert packed == expected and type(packed) is type(expected)
