"""Gymnasium environments of commitbench, registered on import."""

from gymnasium.envs.registration import register, registry

STANDING_ID = "commitbench/Standing-v0"

if STANDING_ID not in registry:
    register(id=STANDING_ID, entry_point="commitbench.envs.standing.env:StandingEnv", disable_env_checker=True)
FOLLOWUP_ID = "commitbench/FollowUp-v0"
if FOLLOWUP_ID not in registry:
    register(id=FOLLOWUP_ID, entry_point="commitbench.envs.followup.env:FollowUpEnv", disable_env_checker=True)
