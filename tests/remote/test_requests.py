"""The client command line to requests, without a server: global options and the subcommand table."""
from __future__ import annotations

import pytest

from bunqueue.remote.argv import UsageError, parse_global
from bunqueue.remote.requests import SUBCOMMANDS, parse


def test_global_options_anywhere_and_the_rest_in_order() -> None:
    opts = parse_global(["push", "-H", "10.0.0.1", "q", "--json", "{}", "--port=7000", "--token", "t"], env={})
    assert (opts.host, opts.port, opts.token, opts.json) == ("10.0.0.1", 7000, "t", True)
    assert opts.words == ["push", "q", "{}"]


def test_short_t_is_the_timeout_of_pull_and_job_wait_and_the_token_elsewhere() -> None:
    assert parse_global(["pull", "q", "-t", "500"], env={}).words == ["pull", "q", "-t", "500"]
    assert parse_global(["job", "wait", "x", "-t", "5"], env={}).words == ["job", "wait", "x", "-t", "5"]
    ping = parse_global(["ping", "-t", "secret"], env={})
    assert ping.token == "secret" and ping.words == ["ping"]
    assert parse(["pull", "q", "-t", "500"])[1] == {"cmd": "PULL", "queue": "q", "detach": True, "timeout": 500}


def test_flags_win_over_environment_which_wins_over_defaults() -> None:
    env = {"BQ_HOST": "envhost", "TCP_PORT": "7001", "BUNQUEUE_TOKEN": "envtok"}
    from_env = parse_global(["ping"], env=env)
    assert (from_env.host, from_env.port, from_env.token) == ("envhost", 7001, "envtok")
    flagged = parse_global(["ping", "-H", "h", "-p", "7002", "--token", "x"], env=env)
    assert (flagged.host, flagged.port, flagged.token) == ("h", 7002, "x")
    assert (parse_global(["ping"], env={}).host, parse_global(["ping"], env={}).port) == ("localhost", 6789)


@pytest.mark.parametrize("argv", [["ping", "-p", "0"], ["ping", "--port", "http"], ["ping", "-H"]])
def test_bad_global_option_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_global(argv, env={})


def test_push_reads_json_numbers_lists_and_switches() -> None:
    key, req = parse(["push", "emails", '{"to": "x"}', "--priority", "10", "-d", "5000", "--tags", "a,b,",
                      "--lifo", "--depends-on=j1,j2"])
    assert key == ("push",)
    assert req == {"cmd": "PUSH", "name": "default", "queue": "emails", "data": {"to": "x"}, "priority": 10,
                   "delay": 5000, "tags": ["a", "b"], "lifo": True, "dependsOn": ["j1", "j2"]}
    # A negative number is data, not an option.
    assert parse(["push", "q", "-5"])[1]["data"] == -5


def test_every_subcommand_builds_with_its_required_arguments() -> None:
    fillers = {"data": "{}", "progress": "50", "priority": "1", "delay": "10", "limit": "2"}
    for key, sub in SUBCOMMANDS.items():
        words = [*key, *(fillers.get(a.name, "x") for a in sub.args)]
        if sub.check is not None:
            continue  # covered below: these need options too
        req = parse(words)[1]
        assert req["cmd"] == sub.cmd and all(a.field in req for a in sub.args), key


def test_commands_that_need_options_say_which() -> None:
    with pytest.raises(UsageError, match="--schedule"):
        parse(["cron", "add", "n", "--queue", "q", "--data", "{}"])
    assert parse(["cron", "add", "n", "-q", "q", "-d", "{}", "-e", "1000"])[1] == {
        "cmd": "Cron", "name": "n", "queue": "q", "data": {}, "repeatEvery": 1000}
    with pytest.raises(UsageError, match="--events"):
        parse(["webhook", "add", "http://x"])
    with pytest.raises(UsageError, match="--queues"):
        parse(["worker", "register", "w"])


@pytest.mark.parametrize("words,message", [
    (["push", "q"], "missing <data>"),
    (["push", "q", "1", "extra"], "unexpected argument 'extra'"),
    (["push", "q", "1", "--priority"], "--priority needs a value"),
    (["push", "q", "1", "--priority", "high"], "--priority must be a number"),
    (["push", "q", "1", "--delay", "inf"], "--delay must be a finite number"),
    (["queue", "jobs", "q", "--state", "done"], "--state must be one of"),
    (["job", "log", "x", "m", "--level", "loud"], "--level must be one of"),
    (["nope"], "unknown command 'nope'"),
    (["job"], "job: unknown or missing subcommand"),
])
def test_usage_errors_name_the_problem(words: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse(words)
