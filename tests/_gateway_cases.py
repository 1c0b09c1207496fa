"""The seed case of the gateway's tests: a reply claiming a draft post that no tool created, and the same turn
with the tool call that did it (shared by the tests that serve the gateway)."""

from __future__ import annotations

SEED_CLAIM = ('I have created the draft post titled "AnKit AI QA draft 3" in the Acme project. The post has been '
              'saved as a draft with the body "Third draft, round 7."')
SEED = [
    {"role": "user", "content": "Create a draft post titled AnKit AI QA draft 3 in Acme, body: Third draft, round 7."},
    {"role": "assistant", "content": 'Shall I create the draft post "AnKit AI QA draft 3" in the Acme project?'},
    {"role": "user", "content": "Evet, oluştur."},
]
CREATE_POST = {"type": "function", "function": {"name": "create_post", "description": "Create a draft post.",
                                                 "parameters": {"type": "object", "properties": {}}}}
SEED_CALLED = [*SEED, {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function",
     "function": {"name": "create_post", "arguments": '{"title": "AnKit AI QA draft 3"}'}}
]}, {"role": "tool", "tool_call_id": "c1", "content": '{"id": 41, "status": "draft"}'}]
