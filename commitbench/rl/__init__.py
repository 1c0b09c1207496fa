"""Both suites offered for training: rewards from the report's own grading, and the degenerate policies they must
rank below a correct one.

:mod:`.rewards` turns a graded run (the standing report's row; the follow-up checker's outcome label) into named
reward terms and their weighted total, as pure functions; :mod:`.episodes` plays and grades episodes through
the runner (so a reward is always the report's grade of a real trace); :mod:`.degenerate` holds the scripted
degenerate policies; :mod:`.gaming` plays them and builds the table of ``docs/rl.md``; :mod:`.evaluate` plays a
served model through the suite's chat agent and returns its rewards. :mod:`.trl` offers the follow-up suite to
TRL (a prompt dataset and reward functions): :mod:`.completions` reads a trainer's completion as one turn and
:mod:`.followup_turns` plays and labels it as a run's turn. :mod:`.verifiers` offers both suites as ``verifiers``
environments (the ``verifiers`` extra). ``docs/rl.md`` is the guide.
"""
