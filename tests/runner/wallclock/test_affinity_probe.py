"""The affinity preflight (docs/product.md §4.5) against the mock over real sockets: the generation
each Dynamo dialect gives away, whether header affinity is on, and the advice a run gets when
its mode would fail or do nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.dynamo import Generation
from runner.errors import BadInput
from runner.mockserver import MockServerConfig, start_mock_server
from runner.wallclock.probe import AffinityDetection, detect_affinity, probe_affinity

MODEL = "mock-model"


def mock_url(**cluster: object) -> Iterator[str]:
    config = MockServerConfig(cluster=ClusterConfig(workers=2, time_scale=0, **cluster))  # type: ignore[arg-type]
    with start_mock_server(config) as server:
        yield server.url


@pytest.fixture(scope="module")
def bind_era() -> Iterator[str]:
    yield from mock_url(dynamo_version=Generation.BIND)


@pytest.fixture(scope="module")
def dynamo_12() -> Iterator[str]:
    yield from mock_url(dynamo_version=Generation.V1_2)


@pytest.fixture(scope="module")
def dynamo_16() -> Iterator[str]:
    yield from mock_url(dynamo_version=Generation.V1_6, header_affinity_ttl_s=300.0)


@pytest.fixture(scope="module")
def dynamo_16_without_ttl() -> Iterator[str]:
    yield from mock_url(dynamo_version=Generation.V1_6)


def detect(url: str) -> AffinityDetection:
    return asyncio.run(detect_affinity(url, model=MODEL))


def probe(url: str, **affinity: object) -> AffinityDetection | None:
    config = AffinityConfig(**affinity)  # type: ignore[arg-type]
    return asyncio.run(probe_affinity(url, model=MODEL, affinity=config, api_key=None, headers={}))


NVEXT = AffinityKind.DYNAMO_NVEXT
HEADERS = AffinityKind.DYNAMO_HEADERS


def test_a_bind_era_server_lists_bind_among_its_actions(bind_era):
    found = detect(bind_era)
    assert found.generation is Generation.BIND and found.nvext_actions == "bind"
    assert "`bind`" in (found.server_message or "")
    assert "dynamo-nvext" in found.usable


def test_dynamo_12_is_told_apart_and_a_bind_run_is_sent_to_open(dynamo_12):
    found = detect(dynamo_12)
    assert found.generation is Generation.V1_2 and found.nvext_actions == "open"
    with pytest.raises(BadInput) as refused:
        probe(dynamo_12, kind=NVEXT, actions="bind")
    message = str(refused.value)
    assert "--affinity-actions open" in message
    assert "expected `open` or `close`" in message  # the server's own words, whole
    assert probe(dynamo_12, kind=NVEXT, actions="open") is not None


def test_dynamo_12_has_no_header_affinity_and_a_headers_run_is_sent_to_nvext_open(dynamo_12):
    found = detect(dynamo_12)
    assert "dynamo-headers" not in found.usable and "dynamo-nvext" in found.usable
    with pytest.raises(BadInput) as refused:
        probe(dynamo_12, kind=HEADERS)
    message = str(refused.value)
    assert "has no header affinity" in message
    assert "--affinity dynamo-nvext --affinity-actions open" in message


def test_a_release_without_session_control_sends_nvext_runs_to_dynamo_headers(dynamo_16):
    found = detect(dynamo_16)
    assert found.generation is Generation.V1_6 and found.nvext_actions is None
    assert "unknown field `session_control`" in (found.server_message or "")
    assert "dynamo-nvext" not in found.usable
    for actions in ("bind", "open"):  # neither is advised: both would fail the same way
        with pytest.raises(BadInput) as refused:
            probe(dynamo_16, kind=NVEXT, actions=actions, scope="lineage")
        message = str(refused.value)
        assert "--affinity dynamo-headers" in message
        assert "--affinity-actions" not in message


def test_header_affinity_is_seen_on_when_one_session_id_keeps_its_worker(dynamo_16):
    found = detect(dynamo_16)
    assert found.header_affinity is True and "dynamo-headers" in found.usable
    assert probe(dynamo_16, kind=HEADERS, scope="lineage") is not None


def test_header_affinity_off_stops_a_dynamo_headers_run_with_the_flag_to_set(
    dynamo_16_without_ttl,
):
    found = detect(dynamo_16_without_ttl)
    assert found.header_affinity is False and "dynamo-headers" not in found.usable
    with pytest.raises(BadInput, match="--router-session-affinity-ttl-secs"):
        probe(dynamo_16_without_ttl, kind=HEADERS, scope="lineage")


def test_runs_without_dynamo_affinity_are_not_probed(bind_era):
    assert probe(bind_era) is None
    assert probe(bind_era, kind=AffinityKind.HEADER, header_name="X-Session-ID") is None
