"""The gateway's JSON codec gives the standard library's values and errors, and the upstream's addressing."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from commitbench import jsoncodec
from commitbench.gateway.upstream import Upstream, environment_proxy

TEXTS = [
    '{"model": "m", "messages": [{"role": "user", "content": "Grüße, 日本 😀"}]}',
    '[1, -2, 3.5, -0.0, 5e-324, 1.0000000000000002, 1E5, true, false, null]',
    "9223372036854775807", "-9223372036854775808", "18446744073709551615",
    "18446744073709551616", "-9223372036854775809", "123456789012345678901234567890",  # beyond 64 bits: ints
    '{"seed": 99999999999999999999999}',
    "NaN", "-Infinity", "[Infinity, 1e400, -1e400]",  # json reads these; orjson refuses them
    '"\\ud800"', '{"\\udfff": 1}', '"a\\ud83d\\ude00"',  # lone surrogates, and a pair
    '{"a": 1, "a": 2}', ' \n{"a": "\\u0000"}\t',
]


def same(left: Any, right: Any) -> bool:
    """Equal, of the same types all the way down, NaN equal to NaN."""
    if type(left) is not type(right) and not (isinstance(left, float) and isinstance(right, float)):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float):
        return (math.isnan(left) and math.isnan(right)) or (left == right and math.copysign(1, left) == math.copysign(
            1, right))
    return bool(left == right)


@pytest.mark.parametrize("text", TEXTS)
def test_loads_gives_the_standard_librarys_value(text: str) -> None:
    expected = json.loads(text)
    assert same(jsoncodec.loads(text), expected)
    assert same(jsoncodec.loads(text.encode("utf-8", "surrogatepass")), expected)


@pytest.mark.parametrize("text", TEXTS)
def test_dumps_writes_what_it_read_as_the_standard_library_writes_it(text: str) -> None:
    written = jsoncodec.dumps(jsoncodec.loads(text))
    assert same(json.loads(written.decode("utf-8", "surrogatepass")), json.loads(text))
    assert b"null" not in written or "null" in text  # a NaN or infinity is never written as null


def test_non_finite_floats_are_written_as_the_standard_library_writes_them() -> None:
    assert jsoncodec.dumps(jsoncodec.loads("[NaN, -Infinity, 1e400]")) == b"[NaN,-Infinity,Infinity]"
    assert jsoncodec.dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()


@pytest.mark.parametrize("text", ['{"model": ', "[1, 2", '{"a" 1}', "", "nul", '{"a": 1} x', "[" * 5000 + "]" * 5000])
def test_loads_raises_the_standard_librarys_error(text: str) -> None:
    with pytest.raises((ValueError, RecursionError)) as expected:
        json.loads(text)
    with pytest.raises(type(expected.value)) as got:
        jsoncodec.loads(text)
    assert str(got.value) == str(expected.value)


def test_utf16_bytes_are_read_as_the_standard_library_reads_them() -> None:
    data = '{"a": "é"}'.encode("utf-16")
    assert jsoncodec.loads(data) == json.loads(data) == {"a": "é"}


@pytest.mark.parametrize(("path", "query", "url"), [
    ("/v1/chat/completions", "", "http://up:8000/v1/chat/completions"),
    ("/v1/models", "a=1&b=2", "http://up:8000/v1/models?a=1&b=2"),
    ("/stats", "", "http://up:8000/stats"),
    ("/v1", "", "http://up:8000/v1"),
])
def test_gateway_paths_map_onto_the_upstream(path: str, query: str, url: str) -> None:
    upstream = Upstream("http://up:8000/v1/", connect_s=1, read_s=1, max_connections=1, max_reply_bytes=1)
    assert upstream.url(path, query) == url


@pytest.mark.parametrize(("env", "url", "proxy"), [
    ({}, "http://127.0.0.1:8000/v1", None),
    ({"HTTP_PROXY": "http://proxy:3128"}, "http://model.internal:8000/v1", "http://proxy:3128"),
    ({"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "model.internal"}, "http://model.internal:8000/v1", None),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "http://model.internal:8000/v1", None),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "https://api.example.com/v1", "http://proxy:3128"),
    ({"ALL_PROXY": "http://proxy:3128"}, "https://api.example.com/v1", "http://proxy:3128"),
])
def test_the_environments_proxy_is_used_unless_no_proxy_covers_the_host(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, proxy: str | None
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment_proxy(url) == proxy
