"""The explicit privileged channel: a wrapper that shows an agent what the script knows.

By default an observation holds only what a participant would see. Reference agents stand in for
perfect understanding of what each message means, so they read the script's annotations; they get
them only through :class:`RevealScriptAnnotations`, which the runner applies to the players that
declare ``privileged = True`` and to nobody else. Oracle interventions that need the annotations ask
for them the same way (``EnvExtras.privileged``) and keep them from the agent.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from commitbench.envs.common import PRIVILEGED_KEY
from commitbench.envs.spaces import observation_space
from commitbench.extras import EnvExtras, add_extras

REVEAL_NAME = "reveal_script"


def merge_annotations(obs: dict[str, Any], info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Observation events with their annotations merged in, and the script's facts lifted into ``info``

    (``info["promise"]`` in the standing environment, ``info["episode"]`` in the follow-up one)."""
    script = info.get(PRIVILEGED_KEY)
    if not isinstance(script, dict):
        raise RuntimeError("the environment sent no script annotations although they were asked for")
    events = tuple({**event, **note} for event, note in zip(obs["events"], script["annotations"], strict=True))
    facts = {key: value for key, value in script.items() if key != "annotations"}
    return {**obs, "events": events}, {**info, **facts}


class RevealScriptAnnotations(gym.Wrapper[dict[str, Any], Any, dict[str, Any], Any], gym.utils.RecordConstructorArgs):
    """Adds ``act``, ``subject`` and ``rank`` to every observed event and the structured promise to ``info``.

    Off by default; for reference agents (no model), whose rules read what a message does rather than
    interpret it. Never part of a model's run: the runner applies it only to privileged players.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.observation_space = observation_space(annotated=True)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = add_extras(options, EnvExtras(privileged=(REVEAL_NAME,)))
        obs, info = self.env.reset(seed=seed, options=options)
        return merge_annotations(obs, info)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = merge_annotations(obs, info)
        return obs, reward, terminated, truncated, info
