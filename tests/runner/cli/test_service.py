"""`python -m runner service` without a service: its arguments, overrides, where the address and
token come from, the config file, the live line, and the errors met before any answer (no
server at the address, a bad option, a broken config file). tests/web/test_service_cli.py
drives it against the running service."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from runner.cli import build_parser, main
from runner.errors import BadInput
from runner.service.commands import overrides_from
from runner.service.config import (
    DEFAULT_URL,
    Config,
    config_path,
    normalize_url,
    resolve_token,
    resolve_url,
)
from runner.service.display import progress_line
from runner.service.shapes import RunDetail, parse


@pytest.fixture(autouse=True)
def _own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder of the test's own, and no address or token from the environment."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("AIPERF_URL", raising=False)
    monkeypatch.delenv("AIPERF_TOKEN", raising=False)
    return tmp_path / "config" / "aiperf-web" / "config.json"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- arguments -------------------------------------------------------------------------------


def test_url_and_token_are_taken_before_or_after_the_subcommand() -> None:
    parser = build_parser()
    before = parser.parse_args(["service", "--url", "http://a:1", "--token", "t1", "runs"])
    assert (before.url, before.token) == ("http://a:1", "t1")
    after = parser.parse_args(["service", "runs", "--url", "http://b:2", "--token", "t2"])
    assert (after.url, after.token) == ("http://b:2", "t2")
    neither = parser.parse_args(["service", "watch", "RUN"])
    assert (neither.url, neither.token, neither.run, neither.every) == (None, None, "RUN", 1.0)


def test_launch_takes_repeated_sets_tags_and_wait() -> None:
    args = build_parser().parse_args(
        ["service", "launch", "demo", "--endpoint", "built-in mock", "--set", "policy=legacy",
         "--set", "duration_s=30", "--tag", "a", "--tag", "b", "--wait", "--every", "0.5"]
    )  # fmt: skip
    assert (args.scenario, args.endpoint, args.wait, args.every) == (
        "demo", "built-in mock", True, 0.5,
    )  # fmt: skip
    assert args.set == ["policy=legacy", "duration_s=30"] and args.tag == ["a", "b"]
    assert build_parser().parse_args(["service", "launch", "demo"]).endpoint == "simulated"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["service"], "the following arguments are required: COMMAND"),
        (["service", "watch"], "the following arguments are required: run"),
        (["service", "watch", "R", "--every", "0"], "between 0.05 and 3600 seconds"),
        (["service", "runs", "--limit", "many"], "'many' is not a whole number"),
        (["service", "export", "R", "--format", "report.pdf"], "invalid choice: 'report.pdf'"),
        (["service", "ab", "demo"], "the following arguments are required: --knob"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


# -- overrides -------------------------------------------------------------------------------


def test_set_lays_json_values_and_dotted_knobs_over_the_overrides_object() -> None:
    result = overrides_from(
        '{"duration_s": 60, "target": {"workers": 2, "router": "kv"}}',
        ["duration_s=30", "policy=legacy", "target.workers=4", "slo_ms.ttft_ms=500",
         "start_window=[0, 0.5]", "prime=true"],
    )  # fmt: skip
    assert result == {
        "duration_s": 30,
        "policy": "legacy",
        "target": {"workers": 4, "router": "kv"},
        "slo_ms": {"ttft_ms": 500},
        "start_window": [0, 0.5],
        "prime": True,
    }
    assert overrides_from(None, []) == {}


@pytest.mark.parametrize(
    ("overrides", "sets", "message"),
    [
        ("{not json", [], "--overrides is not JSON (Expecting property name"),
        ("[1, 2]", [], "--overrides must be a JSON object"),
        (None, ["duration_s"], "--set 'duration_s': write KNOB=VALUE"),
        (None, ["=3"], "--set '=3': write KNOB=VALUE"),
        (None, ["target..workers=3"], "write KNOB=VALUE"),
        ('{"target": "x"}', ["target.workers=3"], "target is already set to a value"),
    ],
)
def test_malformed_overrides_are_refused_naming_the_option(
    overrides: str | None, sets: list[str], message: str
) -> None:
    with pytest.raises(BadInput) as error:
        overrides_from(overrides, sets)
    assert message in str(error.value)


# -- the address, the token and the config file ---------------------------------------------


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("https://perf.example.com/api/v1/", "https://perf.example.com"),
        ("http://host:8000/prefix", "http://host:8000/prefix"),
    ],
)
def test_a_server_address_is_kept_as_its_base(raw: str, url: str) -> None:
    assert normalize_url(raw, source="--url") == url


@pytest.mark.parametrize("raw", ["localhost:8000", "ftp://host", "http://", "http://h/?x=1"])
def test_a_server_address_without_scheme_and_host_is_refused(raw: str) -> None:
    with pytest.raises(BadInput, match=r"^--url '.*'"):
        normalize_url(raw, source="--url")


def test_the_address_and_token_come_from_the_flag_then_the_environment_then_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = Config(url="http://kept:1", tokens={"http://kept:1": "aip_kept"})
    assert resolve_url(None, config) == "http://kept:1"
    assert resolve_token(None, config, url="http://kept:1") == "aip_kept"
    monkeypatch.setenv("AIPERF_URL", "http://env:2")
    monkeypatch.setenv("AIPERF_TOKEN", "aip_env")
    assert resolve_url(None, config) == "http://env:2"
    assert resolve_token(None, config, url="http://kept:1") == "aip_env"
    assert resolve_url("http://flag:3", config) == "http://flag:3"
    assert resolve_token("aip_flag", config, url="http://kept:1") == "aip_flag"
    assert resolve_url(None, Config(url=None, tokens={})) == "http://env:2"
    monkeypatch.delenv("AIPERF_URL")
    assert resolve_url(None, Config(url=None, tokens={})) == DEFAULT_URL


def test_a_kept_token_is_never_sent_to_another_server() -> None:
    config = Config(url="http://kept:1", tokens={"http://kept:1": "aip_kept"})
    with pytest.raises(BadInput, match=r"^no API token for http://other:2: run `python -m "):
        resolve_token(None, config, url="http://other:2")


def test_the_config_file_is_readable_by_its_owner_only_whatever_the_umask(
    _own_config: Path,
) -> None:
    previous = os.umask(0)
    try:
        path = Config(url="http://a:1", tokens={"http://a:1": "aip_x"}).save()
    finally:
        os.umask(previous)
    assert path == _own_config == config_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert Config.load() == Config(url="http://a:1", tokens={"http://a:1": "aip_x"})
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temporary left


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "line 1: not JSON"),
        ('{"url": 3, "tokens": {}}', 'expected {"url": "...", "tokens": {"URL": "TOKEN"}}'),
        ('["a"]', "expected {"),
    ],
)
def test_a_broken_config_file_is_one_line_naming_it_and_the_fix(
    _own_config: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _own_config.parent.mkdir(parents=True)
    _own_config.write_text(text)
    assert main(["service", "runs"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {_own_config}") and message in err
    assert err.rstrip().endswith("delete it and run `python -m runner service login` again")
    assert err.count("\n") == 1


# -- before any answer -----------------------------------------------------------------------


def test_no_service_at_the_address_exits_2_saying_how_to_start_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    assert main(["service", "runs", "--url", url, "--token", "aip_x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot connect to the service at {url} (")
    assert "start it (`make run`) or point --url or AIPERF_URL at it" in err
    assert err.count("\n") == 1


def test_no_token_anywhere_exits_2_saying_where_tokens_come_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["service", "scenarios"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: no API token for {DEFAULT_URL}: run `python -m runner")
    assert "create_api_token" in err and "AIPERF_TOKEN" in err


def test_login_without_a_token_on_stdin_asks_for_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], _own_config: Path
) -> None:
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # noqa: SIM115 (closed by pytest)
    assert main(["service", "login", "--url", "http://127.0.0.1:1"]) == 2
    assert "error: no token given: pass --token" in capsys.readouterr().err
    assert not _own_config.exists()


# -- the live line ---------------------------------------------------------------------------


def _run(status: str, progress: dict[str, Any] | None = None, **extra: Any) -> RunDetail:
    raw = {
        "id": "3f2a", "status": status, "reason": "", "target_kind": "endpoint",
        "scenario": {"id": None, "name": "demo"}, "endpoint": {"id": None, "name": "mock"},
        "summary": None, "tags": [], "created_at": "2026-01-01T00:00:00+00:00",
        "started_at": None, "finished_at": None, "spec": {}, "progress": progress,
        "verdict": {"verdict": "pending", "message": "", "reasons": [], "baseline": None},
        **extra,
    }  # fmt: skip
    return parse(RunDetail, raw, where="test")


FIGURES = {
    "t_s": 12.4, "progress": 0.5, "eta_s": 12.0, "requests": 1340, "errors": 2,
    "in_flight": 8, "ttft_ms": {"p50": 83.4, "p90": None, "p99": None},
    "worker_switches": 40, "orphaned_session_copies": 12,
}  # fmt: skip


def test_the_live_line_shows_the_bar_and_the_figures_that_tell_a_leak() -> None:
    assert progress_line(_run("running", FIGURES)) == (
        f"[{'#' * 12}{'-' * 12}]  50.0% 12s eta 12s | req 1,340  err 2  TTFT p50 83 ms  "
        "orphans 12  switches 40"
    )


def test_the_live_line_fits_a_narrow_terminal_by_dropping_the_bar() -> None:
    line = progress_line(_run("running", FIGURES), width=79)
    assert line.startswith("50.0% 12s eta 12s | req 1,340") and len(line) <= 79


def test_the_live_line_says_why_a_run_waits_and_when_figures_are_not_there_yet() -> None:
    waiting = {"message": "every worker slot is taken", "place": 2}
    assert progress_line(_run("queued", waiting=waiting)) == (
        "queued, place 2 in line: every worker slot is taken"
    )
    assert progress_line(_run("running")).startswith("running: no figures yet")


def test_the_live_line_says_ending_past_the_stop_and_the_status_once_ended() -> None:
    done = {**FIGURES, "progress": 1.0, "eta_s": 0.0}
    assert "100.0% 12s ending | " in progress_line(_run("running", done))
    assert "100.0% 12s failed | " in progress_line(_run("failed", done))


def test_an_answer_of_another_shape_is_one_line_naming_the_field() -> None:
    with pytest.raises(BadInput) as error:
        parse(RunDetail, {"id": "x"}, where="GET /api/v1/runs/x")
    assert str(error.value).startswith(
        "GET /api/v1/runs/x answered in a shape this command line does not know (status: "
    )
    assert json.dumps(str(error.value)).count("\\n") == 0
