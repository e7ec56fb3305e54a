"""Classic RL on the search env with Stable-Baselines3 (the ``sb3`` extra), at the edge.

- :mod:`searchgym.sb3.templates`: one episode seen through template actions
  (search the question, search a reformulation, keep passage i, final) and its numeric
  features, shared by training and play;
- :mod:`searchgym.sb3.env`: :class:`TemplateActions`, the Gymnasium wrapper giving a
  ``SearchEnv`` a ``Discrete`` action space and ``Box`` observations;
- :mod:`searchgym.sb3.train`: :func:`train_sb3` (``searchgym train --algorithm
  sb3-ppo|sb3-dqn``), evaluation and the run folder;
- :mod:`searchgym.sb3.agent`: :class:`SB3Agent`, a trained policy as a benchmark agent
  (``make_agent("sb3", env, policy=RUN)``).

Stable-Baselines3 is imported only to build or load a model, so this package imports
without it.
"""

from searchgym.sb3.agent import SB3Agent, load_policy
from searchgym.sb3.algorithms import SB3_ALGORITHMS, SB3_DEFAULTS, algorithm_class
from searchgym.sb3.env import TemplateActions, answer_with
from searchgym.sb3.templates import GLOBAL_FEATURES, SLOT_FEATURES, TemplateState, template_names
from searchgym.sb3.train import SB3Args, evaluate_template_policy, make_template_env, train_sb3

__all__ = [
    "GLOBAL_FEATURES", "SB3Agent", "SB3Args", "SB3_ALGORITHMS", "SB3_DEFAULTS", "SLOT_FEATURES", "TemplateActions",
    "TemplateState", "algorithm_class", "answer_with", "evaluate_template_policy", "load_policy", "make_template_env",
    "template_names", "train_sb3",
]
