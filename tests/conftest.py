"""Shared fixtures: a real OpenAI-compatible mock server on 127.0.0.1 and settings that point at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from commitbench.llm import ModelSettings
from commitbench.mockserver import DEFAULT_MODEL, MockServer


@pytest.fixture(scope="session")
def _mock_server_process_wide() -> Iterator[MockServer]:
    server = MockServer().start()
    yield server
    server.stop()


@pytest.fixture
def mock_server(_mock_server_process_wide: MockServer) -> Iterator[MockServer]:
    """A running :class:`~commitbench.mockserver.MockServer`, reset before and after each test.

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
