"""The follow-up suite as a verifiers environment: ``vf-eval commitbench-followup`` (docs/rl.md, "verifiers")."""

from commitbench.rl.verifiers import CommitbenchEnv, CommitbenchHarness, FollowupTaskset

__all__ = ["CommitbenchEnv", "CommitbenchHarness", "FollowupTaskset"]
