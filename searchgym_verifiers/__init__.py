"""The verifiers taskset id ``searchgym-verifiers``: ``vf-eval searchgym-verifiers --env.taskset.env_id SearchR1-v0``.

verifiers 0.4.0 imports a taskset id as a top-level module (``-`` read as ``_``) and takes
the ``Taskset`` and ``Harness`` subclasses its ``__all__`` exports; the classes live in
:mod:`searchgym.integrations.verifiers`.
"""

from searchgym.integrations.verifiers import SearchGymEnv, SearchGymHarness, SearchGymTask, SearchGymTaskset

__all__ = ["SearchGymEnv", "SearchGymHarness", "SearchGymTask", "SearchGymTaskset"]
