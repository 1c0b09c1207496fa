"""Drills: what is wrong with a config, a cache file or a ledger file is said once, at the start, by name.

A damaged cache found in the middle of a run is damage (exit 2, the damage named), not a full disk; a
config's numbers are finite and its counts whole numbers; a model is reached over HTTP; reading a
ledger writes nothing, even into an empty file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from commitbench.cli import main as cli_main
from commitbench.config import ConfigError, load_config
from commitbench.mock import MockServer
from commitbench.rundir import RunStatus, read_manifest


def write_config(path: Path, **changes: Any) -> Path:
    data: dict[str, Any] = {
        "name": "t", "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [{"name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None,
                    "settings": {"model": "x"}}],
        "episodes": {"split": "test", "limit": 1},
    }
    for key, value in changes.items():
        if key == "settings":
            data["models"][0]["settings"].update(value)
        elif key == "model":
            data["models"][0].update(value)
        else:
            data[key] = value
    path.write_text(json.dumps(data))
    return path


def yaml_config(path: Path, extra: str) -> Path:
    path.write_text(
        "name: t\nenv: commitbench/Standing-v0\nagents: [chat]\n"
        "models: [{name: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: null, settings: {model: x}}]\n"
        "episodes: {split: test, limit: 1}\n" + extra
    )
    return path


REFUSED_AT_LOAD = {
    "an infinite timeout": ("models: [{name: m, base_url: 'http://127.0.0.1:9/v1', settings: {model: x, "
                            "timeout: .inf}}]\n", "models.0.settings.timeout: inf is not a finite number"),
    "a NaN in extra_body": ("models: [{name: m, base_url: 'http://127.0.0.1:9/v1', settings: {model: x, "
                            "extra_body: {top_k: .nan}}}]\n", "models.0.settings.extra_body.top_k: nan is not"),
    "samples: true": ("samples: true\n", "samples: Input should be a valid integer"),
    "samples: 2.0": ("samples: 2.0\n", "samples: Input should be a valid integer"),
    "concurrency: 4.0": ("concurrency: 4.0\n", "concurrency: Input should be a valid integer"),
    "max_tokens: 1.5": ("models: [{name: m, base_url: 'http://127.0.0.1:9/v1', settings: {model: x, "
                        "max_tokens: 16.0}}]\n", "models.0.settings.max_tokens: Input should be a valid integer"),
    "a file URL": ("models: [{name: m, base_url: 'file:///etc/passwd'}]\n",
                   "base_url 'file:///etc/passwd' must be an http:// or https:// URL"),
    "a URL without a scheme": ("models: [{name: m, base_url: 'localhost:8000/v1'}]\n", "must be an http://"),
    "a replica that is no URL": ("models: [{name: m, base_urls: ['http://a:1/v1', 'gopher://b/v1']}]\n",
                                 "base_urls[1] 'gopher://b/v1' must be an http://"),
    "a URL with no host": ("models: [{name: m, base_url: 'http:///v1'}]\n", "names no host"),
}


@pytest.mark.parametrize("extra,message", REFUSED_AT_LOAD.values(), ids=list(REFUSED_AT_LOAD))
def test_a_config_is_refused_at_load_naming_the_field(tmp_path: Path, extra: str, message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml_config(tmp_path / "c.yaml", "").read_text()
    if extra.startswith("models:"):  # replaces the model list
        text = "\n".join(line for line in text.splitlines() if not line.startswith("models:")) + "\n"
    (tmp_path / "c.yaml").write_text(text + extra)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "c.yaml")
    assert message in str(caught.value), str(caught.value)
    # --dry-run refuses it too (it used to pass, and the run failed later naming no field).
    assert cli_main(["run", str(tmp_path / "c.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_whole_and_finite_values_still_load(tmp_path: Path) -> None:
    config = load_config(yaml_config(tmp_path / "c.yaml", "samples: 2\nconcurrency: 4\n"))
    assert config.samples == 2 and config.concurrency == 4
    https = write_config(tmp_path / "h.json", model={"base_url": "https://user:pw@api.example.org/v1"},
                         settings={"timeout": 30.5, "max_tokens": 64})
    assert load_config(https).models[0].settings.max_tokens == 64


def test_a_cache_found_damaged_mid_run_is_damage_exit_2_naming_it(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = write_config(tmp_path / "c.json", model={"base_url": mock_server.base_url},
                               episodes={"split": "test", "limit": 30}, concurrency=4)
    cache = tmp_path / "run" / "cache.sqlite"
    assert cli_main(["run", str(config_path), "--out", str(tmp_path / "run"), "--no-progress", "--no-report"]) == 0
    capsys.readouterr()
    # Pages in the middle of the file overwritten: it opens, and the damage shows on the first lookup that reads
    # one of them.
    data = bytearray(cache.read_bytes())
    data[len(data) // 3: 2 * len(data) // 3] = b"\x5a" * (2 * len(data) // 3 - len(data) // 3)
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(bytes(data))
    code = cli_main(["run", str(config_path), "--out", str(tmp_path / "again"), "--cache", str(damaged),
                     "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"cache {damaged} is damaged" in err and "free the disk" not in err and "Traceback" not in err
    manifest = read_manifest(tmp_path / "again")
    assert manifest is not None and manifest.status is RunStatus.ABORTED and "damaged" in manifest.message


def test_sqlite_errors_are_told_apart_as_damage_or_the_machine() -> None:
    """Damage (no retry mends it) stops a run as aborted; the machine's errors (locked, full, read-only) as failed."""
    import sqlite3

    from commitbench.cache import _cache_error

    for error in (sqlite3.DatabaseError("database disk image is malformed"),
                  sqlite3.DatabaseError("file is not a database")):
        assert _cache_error(Path("c.sqlite"), error).damaged
    for error in (sqlite3.OperationalError("database is locked"), sqlite3.OperationalError("database or disk is full"),
                  sqlite3.OperationalError("attempt to write a readonly database")):
        assert not _cache_error(Path("c.sqlite"), error).damaged


def test_reading_an_empty_ledger_file_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    for command in (["list"], ["due"], ["show", "1"]):
        code = cli_main(["ledger", "--db", str(db), *command])
        err = capsys.readouterr().err
        assert code == 1 and "no ledger in" in err and "nothing was written" in err, err
    assert db.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    # 'add' still makes a ledger of an empty file, and reading it then works.
    assert cli_main(["ledger", "--db", str(db), "add", "--debtor", "bot", "--creditor", "alice",
                     "--action", "send the report"]) == 0
    assert cli_main(["ledger", "--db", str(db), "list"]) == 0
    assert "send the report" in capsys.readouterr().out


def test_serve_local_refuses_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["serve-local", "--port", "70000"]) == 2
    assert "--port must be from 0" in capsys.readouterr().err
