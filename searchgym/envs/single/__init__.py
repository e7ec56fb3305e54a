"""The single-agent env: one agent plays one of the five papers' games against the corpus.

- :mod:`~searchgym.envs.single.core`: :class:`SearchEnv`, the Gymnasium shell (spaces,
  ``reset``/``step``, ``info``) over the game;
- :mod:`~searchgym.envs.single.game`: :class:`SearchGame`, the rules of an episode (budgets,
  searches, selections, evidence, the answer and its reward), free of Gymnasium;
- :mod:`~searchgym.envs.single.tasks`: what every env over a corpus shares (questions,
  corpus, the choice of a question at reset, argument checks, the word counter);
- :mod:`~searchgym.envs.single.spaces`, :mod:`~searchgym.envs.single.checks` and
  :mod:`~searchgym.envs.single.wrappers`: text spaces, the checkers users run on their envs,
  and the strict wrapper that raises on a malformed turn.

The tag grammars are in :mod:`searchgym.envs.protocols`, the model components in
:mod:`searchgym.envs.components`; the team game builds on this one in :mod:`searchgym.envs.team`.
"""
