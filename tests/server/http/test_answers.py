"""Answers.health_body: the /health body written from its figures is health_of's document, byte for byte."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue.monitoring.snapshot import Totals
from bunqueue.server.http.answers import Answers
from bunqueue.server.http.encoding import json_bytes

counts = st.integers(0, 2**40)


async def _never(request: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("health answers run no command")


@settings(max_examples=200, deadline=None)
@given(totals=st.builds(Totals, waiting=counts, prioritized=counts, delayed=counts, active=counts,
                        completed=counts, dlq=counts),
       connections=st.tuples(counts, counts, counts).map(lambda c: {"tcp": c[0], "ws": c[1], "sse": c[2]}),
       memory=st.fixed_dictionaries({"heapUsed": st.floats(0, 1e6), "heapTotal": st.floats(0, 1e6),
                                     "rss": st.sampled_from([0.0, 12.0, 45.67, 1e-7, 123456.78])}),
       storage=st.sampled_from([{}, {"diskFull": False}, {"diskFull": True}, {"reachable": False},
                                {"reachable": True, "error": None}]))
def test_model_the_health_body_is_the_health_document_encoded(
    totals: Totals, connections: dict[str, int], memory: dict[str, float], storage: dict[str, Any]
) -> None:
    answers = Answers(_never, lambda: connections, lambda: totals, lambda: storage)
    # Read the memory once so both answers see the same figures (they are kept for a second).
    answers.health_of({})
    answers.health_memory = memory
    answers.health_memory_json = json_bytes(memory)
    doc, status = answers.health_of(storage)
    body, body_status = answers.health_body(storage)
    assert (body, body_status) == (json_bytes(doc), status)
    assert status == (503 if storage.get("diskFull") or storage.get("reachable") is False else 200)
