"""The team game: searcher, summarizer and generator played as separate agents.

- :mod:`~searchgym.envs.team.game`: :class:`TeamGame`, the rules of a team episode;
- :mod:`~searchgym.envs.team.seats` (what each role reads and writes),
  :mod:`~searchgym.envs.team.protocol` (the summarizer's and generator's grammars),
  :mod:`~searchgym.envs.team.scoring` (each role's reward) and
  :mod:`~searchgym.envs.team.info` (each role's ``info``);
- :mod:`~searchgym.envs.team.multi_agent`: ``search_team_v0``, the PettingZoo env (AEC and
  parallel; needs the ``multiagent`` extra);
- :mod:`~searchgym.envs.team.role_env`: :class:`RoleEnv`, one role as a Gymnasium env with
  the others played by fixed policies (``searchgym/MultiAgent*-v0``).
"""
