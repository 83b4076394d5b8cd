"""Random and mutated HTTP requests on every route over keep-alive connections: no 500, no exception
text, no hang, no dropped request, and the server alive at the end."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from bunqueue._testbase.httpfuzzer import HttpFuzzer
from bunqueue._testbase.server import ServerProcess


@pytest.fixture(scope="module")
def http_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "1000000000"}).start()
    yield proc
    proc.stop()


@pytest.mark.parametrize("seed", [1, 2])
def test_random_http_requests_cost_no_defect(http_server: ServerProcess, seed: int) -> None:
    fuzzer = HttpFuzzer(("127.0.0.1", http_server.http_port), seed)
    assert http_server.proc is not None
    verdict = fuzzer.run(1500, alive=lambda: http_server.proc.poll() is None)
    # Every request was answered or (broken framing) closed, and most reached a route.
    assert verdict.answers >= verdict.requests * 0.9 and verdict.status.get(200, 0) > 300, verdict.summary()
    assert verdict.defects == 0, (verdict.summary(), verdict.server_errors[:3], verdict.exception_texts[:3],
                                  verdict.hangs[:3], verdict.dropped[:3])
