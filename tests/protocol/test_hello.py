from __future__ import annotations

from bunqueue._testbase.frames import RawClient


def test_hello_states_what_the_server_speaks(raw: RawClient) -> None:
    for request in ({"cmd": "Hello", "protocolVersion": 3, "capabilities": ["pipelining"]},
                    {"cmd": "Hello", "protocolVersion": 99, "capabilities": "nope"}, {"cmd": "Hello"}):
        reply = raw.call(request)
        assert reply["protocolVersion"] == 3 and reply["server"] == "bunqueue"
        assert reply["capabilities"] == ["pipelining", "separate-job-name"]
        assert isinstance(reply["version"], str)


def test_ping(raw: RawClient) -> None:
    reply = raw.call({"cmd": "Ping"})
    assert reply["ok"] is True and reply["data"]["pong"] is True
    assert isinstance(reply["data"]["time"], float) and reply["data"]["time"] > 1.7e12
