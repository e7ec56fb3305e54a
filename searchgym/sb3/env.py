"""The search env as a classic RL env: numeric features and template actions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from searchgym.corpora.types import Passage
from searchgym.envs.components.frozen import doc_text, make_frozen
from searchgym.envs.single.core import SearchEnv
from searchgym.error import ConfigError, SearchGymError
from searchgym.sb3.templates import TemplateState, window_passages


def answer_with(generator: Any, question: str, docs: Sequence[Passage], answers: Sequence[str]) -> str:
    """``generator``'s answer to ``question`` from ``docs`` (the gold answers go to a
    generator that reads them, such as ``gold-span``)."""
    texts = [doc_text(p) for p in docs]
    if getattr(generator, "uses_gold", False):
        return str(generator(question, texts, answers=answers))
    return str(generator(question, texts))


class TemplateActions(gym.Wrapper):
    """A :class:`~searchgym.envs.single.core.SearchEnv` with numeric observations and a
    ``Discrete`` action space of templates, for classic RL (Stable-Baselines3).

    ## Action Space
    ``Discrete(top_k + 3)``: ``search_question``, ``search_reform``, ``select_1`` …
    ``select_{top_k}``, ``final`` (see :mod:`searchgym.sb3.templates`). Selections take
    no env turn. ``final`` ends the episode: in the s3 protocol the env's frozen
    generator answers; in the others ``generator`` answers from the selected passages
    and those of every search in which none was selected (s3's rule) and the wrapper
    writes that answer as the agent's turn. A template that cannot run does nothing and costs ``invalid_penalty``;
    ``info["action_mask"]`` and :meth:`action_masks` tell which can.

    ## Observation Space
    ``Box(0, 1, (11 + 8 * top_k,), float32)``: :data:`~searchgym.sb3.templates.GLOBAL_FEATURES`
    (turn, searches, whether the question was searched, whether a reformulation is
    available, question words covered by the selected / latest passages, support of the
    best passage's candidate names among the latest passages) and, per passage slot of
    the latest search, :data:`~searchgym.sb3.templates.SLOT_FEATURES` (retrieval score
    relative and absolute, overlap with the question and with the query, selected, seen
    before, names the question lacks).

    ## Rewards
    The env's reward (scored when the episode ends), minus ``invalid_penalty`` per
    template that could not run and, at the end, ``passage_cost`` per passage the answer
    is generated from (the selected ones and every passage of each search in which none
    was selected; in s3 the env generator's context, which follows the same rule).

    ## Arguments
    - ``env``: a SearchEnv (wrapped or not) of any protocol.
    - ``generator``: answers ``final`` in protocols whose agent answers: a callable
      ``(question, docs) -> str``, ``"gold-span"`` (default; answers when a selected passage
      contains a gold answer, LM-free) or a language model / model name. Must be None in
      the s3 protocol, where the env's own generator answers.
    - ``max_steps``: templates per episode before ``final`` is forced (default
      ``max_turns * (top_k + 1)``).
    - ``invalid_penalty``, ``passage_cost``: the reward terms above (non-negative).
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        generator: Any = None,
        max_steps: int | None = None,
        invalid_penalty: float = 0.05,
        passage_cost: float = 0.0,
    ):
        super().__init__(env)
        inner = getattr(env, "unwrapped", env)
        if not isinstance(inner, SearchEnv):
            raise ConfigError(f"TemplateActions expects a searchgym SearchEnv (e.g. gym.make('searchgym/SearchR1-v0')), got {type(inner).__name__}.")
        for name, value in (("invalid_penalty", invalid_penalty), ("passage_cost", passage_cost)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ConfigError(f"TemplateActions expects {name} to be a non-negative number, got {value!r}.")
        if max_steps is None:
            max_steps = inner.max_turns * (inner.top_k + 1)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(f"TemplateActions expects max_steps to be a positive integer, got {max_steps!r}.")
        if inner.protocol.answers_with_generator:
            if generator is not None:
                raise ConfigError(
                    f"In the {inner.protocol.name!r} protocol the env's own frozen generator answers; "
                    "give it to gym.make(..., generator=...) and leave TemplateActions' generator None."
                )
            self.generator = None
        else:
            self.generator = make_frozen("generator", "gold-span" if generator is None else generator)
        self.text_env: SearchEnv = inner  # the text env under every wrapper
        self.invalid_penalty = float(invalid_penalty)
        self.passage_cost = float(passage_cost)
        self.state = TemplateState(
            inner.protocol, top_k=inner.top_k, max_turns=inner.max_turns, max_searches=inner.max_searches, max_steps=max_steps
        )
        self.action_space = gym.spaces.Discrete(self.state.num_actions)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.state.num_features,), dtype=np.float32)
        self._info: dict[str, Any] = {}
        self.context_passages = 0

    @property
    def template_names(self) -> list[str]:
        """The template of each action number."""
        return list(self.state.names)

    def action_masks(self) -> np.ndarray:
        """Which templates can run now (for action-masking algorithms)."""
        return self.state.valid_actions()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        _, info = self.env.reset(seed=seed, options=options)
        passages, scores = window_passages(self.text_env.corpus, info)
        self.state.reset(info["question"], passages, scores)
        self.context_passages = 0
        self._info = dict(info)
        return self.state.features(), self._with_mask(self._info, template=None, template_invalid=False)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.state.done:
            raise SearchGymError("TemplateActions.step() was called on a finished episode; call reset() first.")
        if isinstance(action, np.ndarray) and action.shape in ((), (1,)):
            action = action.reshape(()).item()
        name = self.state.names[action] if isinstance(action, (int, np.integer)) and 0 <= action < self.state.num_actions else None
        decision = self.state.decide(action)
        reward = -self.invalid_penalty if decision.invalid else 0.0
        turn = decision.turn
        if decision.final and turn is None:
            inner = self.text_env
            answer = answer_with(self.generator, inner.example.question, decision.answer_docs, inner.example.answers)
            turn = self.state.answer_turn(answer, decision.answer_docs)
        if turn is None:
            return self.state.features(), reward, False, False, self._with_mask(self._info, template=name, template_invalid=decision.invalid)
        _, env_reward, terminated, truncated, info = self.env.step(turn)
        self.state.follow(info, self.text_env.corpus)
        reward += float(env_reward)
        if terminated or truncated:
            self.state.done = True
            self.context_passages = self._context_passages(decision)
            reward -= self.passage_cost * self.context_passages
        self._info = dict(info)
        return self.state.features(), reward, terminated, truncated, self._with_mask(self._info, template=name, template_invalid=decision.invalid)

    def _context_passages(self, decision: Any) -> int:
        inner = self.text_env
        if inner.protocol.answers_with_generator:
            return len(inner.generator_context())
        return len(decision.answer_docs)

    def _with_mask(self, info: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        out = dict(info, **extra)
        out["action_mask"] = self.state.valid_actions()
        out["template_steps"] = self.state.steps
        return out
