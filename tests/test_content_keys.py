"""Every content key the harness makes, on fixed inputs, pinned to the values it has always had.

A cache key, a run key, a config or cells hash, a data digest, a prompt hash, an episode id, a texts file's
digest, an intervention's text hash, the gateway's turn digest and pseudonyms all address stored data: a
change of one byte orphans every cache entry, run directory or log line written before it. Where the input
is fixed here, the value is pinned literally; where it is the project's own text (a prompt, the chat
rendering), the value is checked against the formula it was always made by.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from commitbench.agents.chat import (
    CALL_LIMIT_TEXT,
    ENDED_TEXT,
    NOT_RUN_TEXT,
    NOTICE_PREFIX,
    POSTED_TEXT,
    PROTOCOL_TOOLS,
    RENDER_HASH,
    RENDER_VERSION,
    TOOLS_ONLY,
    UNPARSED_KEY,
    protocol_hash,
)
from commitbench.agents.custom import custom_identity, load_agent_class
from commitbench.cache import cache_key
from commitbench.config import ExperimentConfig
from commitbench.dataversion import hash_tree
from commitbench.digests import digest, digest_bytes
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.followup.profile import FollowupSettings, MonitoringDoability, StatedParagraph
from commitbench.episodes.followup.tools import account_record
from commitbench.episodes.standing.compiler import _seed
from commitbench.gateway.logbook import pseudonym
from commitbench.gateway.turn import turn_digest
from commitbench.identity import cells_hash, config_hash, run_key
from commitbench.oracles.base import text_hash
from commitbench.runner import run_experiment
from commitbench.textslots import read_texts
from commitbench.traces import TRACES_FILE, AgentIdentity, read_traces

AGENT = AgentIdentity(name="chat:m", kind="chat", settings={"model": {"model": "m", "temperature": 0.7}})
ARM = [{"name": "oracle", "params": {"level": "full", "ratio": 1e-05}}]


def test_cache_keys() -> None:
    identity = {"model": "qwen", "temperature": 0.0, "extra_body": {"top_k": 20}}
    messages = [{"role": "system", "content": "Tu es Zoë."}, {"role": "user", "content": "1e-07 ≠ 0"}]
    assert cache_key(identity, messages) == "0492a7abf8de4fea03f8c377289e5909a4cbe5e67db48d4a41657fa9cc1d4b80"
    tools = [{"type": "function", "function": {"name": "end_turn"}}]
    assert cache_key(identity, messages, tools=tools, options={"tool_choice": "auto"}, sample_index=3) == (
        "01164c9611e78e4e35fa600c93552316c2122e81fa657929f49d3e2c51b185b2"
    )


def test_run_keys_and_the_hashes_of_a_run() -> None:
    assert run_key(AGENT, ARM, "commitbench/Standing-v0", "st-0123456789ab", 2) == (
        "7e3a1e6c6f47e22ad79a1c69a2c1d002d27f69263f923675497f86c7b751520e"
    )
    assert run_key(AGENT, ARM, "commitbench/FollowUp-v0", "fu-1", 0, services={"flagger": {"model": "j"}},
                   texts="ab" * 32) == "95702782f0c46915e3a5e3960d2c904b8663d54c814ea881b7f09d956849c053"
    assert cells_hash(["b" * 64, "a" * 64, "c" * 64]) == (
        "3a9126ada7449a9ae43078e666cc5105bcd9700245277275a7a95ab954d338df"
    )
    assert cells_hash([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert config_hash({"name": "démo", "samples": 2, "agents": ["chat"], "seed": None}) == (
        "4d49c7e87daeea29efef94e21dab9e7f4e679e6649238713a3b8b49905dc6648"
    )


def test_the_digest_of_a_data_tree(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.yaml").write_bytes(b"key: value\n")
    (tmp_path / "a.txt").write_bytes("naïve\n".encode())
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_bytes(b"ignored")
    assert hash_tree(tmp_path) == "3feaaaec5df8953b5e9a02e2735426631faa4e4812f1c0470096aa578bea5094"
    assert hash_tree(tmp_path / "b" / "nothing-here") == hashlib.sha256(b"").hexdigest()


def test_the_gateways_turn_digest_and_pseudonyms() -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "café ☕"}], "temperature": 1}
    assert turn_digest(request, "alice") == "d67b44751f52742d993021a7408233a3acace515d9518a8285d9ac711a556d24"
    # A lone surrogate (JSON "\ud800") is hashed, not refused.
    assert turn_digest({"model": "m", "messages": [{"role": "user", "content": "\ud800"}]}, "") == (
        "5f5800ac0aac74d3e23bbc7c319e9b4a3c4be5c942faae44cdecdad3a96b5037"
    )
    assert turn_digest({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "") == (
        "8d5721a6801ac452cb5365e43bc88b52731c4f484b3acf0415c9020ca4c42fe4"
    )
    assert pseudonym("session-42") == "92e76c732d82ec49"
    assert pseudonym("\udcff") == "8f1d0f9c88065271"
    assert pseudonym("") is None and pseudonym(None) is None


def test_a_texts_files_digest(tmp_path: Path) -> None:
    path = tmp_path / "texts.yaml"
    path.write_bytes("followup.persona.generic: Vous êtes un assistant.\n".encode())
    assert read_texts(path).sha256 == "d7a05251e21d8dc482240a588fef3637f1c2787906e9841c3bff088f73693a55"


def test_intervention_text_hashes() -> None:
    assert text_hash("explicit: the episode's own wording") == (
        "4ed447c923da9d7cdf3a792b32e268e2bb8a25e38d991a58a2e0b711c15627ba"
    )
    assert text_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert text_hash("first", "sécond", "") == "3475402251ec8367ffca3864bb1ccc1ecd288516f5ccd6dddee86375467f183a"


def test_episode_seeds_profile_tags_and_account_records() -> None:
    assert _seed("deadline", "short", 3, 0) == 12848230070577007449
    assert FollowupSettings(stated_paragraph=StatedParagraph.PAPER).tag() == "s6479eb41"
    assert FollowupSettings(monitoring_doability=MonitoringDoability.PAPER).tag() == "sa229eba5"
    assert account_record(" 4417-2209 ") == (
        "Account 4417-2209: plan Fixed Saver 12; balance 246.51 due; next bill on 18 October 2026; "
        "open service requests: 0."
    )


def test_the_chat_renderings_hashes_follow_their_formula() -> None:
    render = [RENDER_VERSION, NOT_RUN_TEXT, CALL_LIMIT_TEXT, NOTICE_PREFIX, UNPARSED_KEY,
              "[{channel}] {sender} ({role}): "]
    assert hashlib.sha256(json.dumps(render).encode()).hexdigest() == RENDER_HASH
    payload = [TOOLS_ONLY, list(PROTOCOL_TOOLS), POSTED_TEXT, ENDED_TEXT]
    assert protocol_hash() == hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


AGENT_MODULE = '''"""A player of the user's own, for its source digest."""


class Quiet:
    def begin(self, observation, info):
        return None

    def act(self, observation, info):
        return {"kind": "end_turn"}
'''


def test_a_custom_players_source_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pinned_quiet_player.py").write_text(AGENT_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cls = load_agent_class("pinned_quiet_player:Quiet")
        identity = custom_identity("pinned_quiet_player:Quiet", cls)
    finally:
        sys.modules.pop("pinned_quiet_player", None)
    assert identity.settings["source_sha256"] == "74277ae443baee04f498004d29b01e6c06b8d36d9231d32a2e52305043266fd2"


def test_a_traces_system_prompt_hash_follows_its_formula(tmp_path: Path) -> None:
    config = ExperimentConfig.model_validate(
        {"env": STANDING_ENV_ID, "agents": ["always-execute"], "episodes": {"split": "test", "limit": 1}}
    )
    run_experiment(config, tmp_path / "run")
    traces = read_traces(tmp_path / "run" / TRACES_FILE)
    assert traces
    for trace in traces:
        system = next(e.text for e in trace.events if e.kind.value == "system")
        assert trace.prompt_hashes["system_prompt"] == hashlib.sha256(system.encode("utf-8")).hexdigest()


def test_digest_is_the_sha256_of_its_parts_joined_or_of_canonical_json() -> None:
    assert digest() == hashlib.sha256(b"").hexdigest()
    assert digest("é", b"\x00", "z") == hashlib.sha256("é\x00z".encode()).hexdigest()
    assert digest("a", "b", sep="\n") == digest(b"a\nb") == hashlib.sha256(b"a\nb").hexdigest()
    assert digest("\ud800") == hashlib.sha256("\ud800".encode("utf-8", "surrogatepass")).hexdigest()
    value = {"b": [1, 2.5, None], "a": "ü"}
    assert digest(json=value) == hashlib.sha256('{"a":"ü","b":[1,2.5,null]}'.encode()).hexdigest()
    assert digest(json=None) == hashlib.sha256(b"null").hexdigest()
    assert digest("x", length=8) == hashlib.sha256(b"x").hexdigest()[:8]
    with pytest.raises(TypeError):
        digest("x", json=1)
    for length in (0, 65):
        with pytest.raises(ValueError):
            digest("x", length=length)


@pytest.mark.parametrize("part", ["episode 1, player p", "", "a lone surrogate \ud800", b"\x00\xff raw"])
def test_a_digest_as_bytes_is_the_hex_digest_read_as_bytes(part: str | bytes) -> None:
    for size in (1, 16, 32):
        assert digest_bytes(part, size) == bytes.fromhex(digest(part, length=2 * size))
    for size in (0, 33):
        with pytest.raises(ValueError, match="1 to 32 bytes"):
            digest_bytes(part, size)
