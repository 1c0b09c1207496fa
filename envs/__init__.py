"""Gymnasium environments of commitbench, registered on import.

The environment ids are defined here and nowhere else; everything that names an environment
(configs, suites, traces) imports them from this module.
"""

from gymnasium.envs.registration import register, registry

STANDING_ENV_ID = "commitbench/Standing-v0"
FOLLOWUP_ENV_ID = "commitbench/FollowUp-v0"

_ENTRY_POINTS = {
    STANDING_ENV_ID: "commitbench.envs.standing.env:StandingEnv",
    FOLLOWUP_ENV_ID: "commitbench.envs.followup.env:FollowUpEnv",
}

for _env_id, _entry_point in _ENTRY_POINTS.items():
    if _env_id not in registry:
        register(id=_env_id, entry_point=_entry_point, disable_env_checker=True)
