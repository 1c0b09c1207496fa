"""The standing suite as a verifiers environment: ``vf-eval commitbench-standing`` (docs/rl.md, "verifiers")."""

from commitbench.rl.verifiers import CommitbenchEnv, CommitbenchHarness, StandingTaskset

__all__ = ["CommitbenchEnv", "CommitbenchHarness", "StandingTaskset"]
