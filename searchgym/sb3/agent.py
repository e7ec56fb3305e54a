"""A trained Stable-Baselines3 template policy as a benchmark agent.

:class:`SB3Agent` plays a policy from ``searchgym train --algorithm sb3-ppo|sb3-dqn`` on
the plain text env: it follows each episode with the same
:class:`~searchgym.sb3.templates.TemplateState` as the training wrapper (so the policy
sees the same features), lets the policy pick templates until one needs an env turn, and
writes that turn in the env's protocol. When the policy ends an episode in a protocol
whose agent answers, a language model answers from the chosen passages with s3's RAG
prompt (the naive-RAG baseline's reader and prompt, so the two are compared on the
passages alone); in the s3 protocol the env's frozen generator answers.

    agent = make_agent("sb3", env, lm=lm, policy="runs/sb3")     # run folder or model.zip
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.agents.base import Agent, turn_seed
from searchgym.agents.baselines import clean_answer
from searchgym.agents.trajectory import Trajectory
from searchgym.envs.access import search_env
from searchgym.envs.components.frozen import doc_text
from searchgym.envs.components.lm_frozen import generator_messages
from searchgym.error import ConfigError
from searchgym.lm.base import Generation, LanguageModel
from searchgym.sb3.algorithms import algorithm_class
from searchgym.sb3.env import answer_with
from searchgym.sb3.templates import TemplateState, window_passages


def load_policy(policy: str | Path, *, device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    """The SB3 model and the ``policy.json`` record of a run folder (or its ``model.zip``)."""
    path = Path(policy)
    folder = path if path.is_dir() else path.parent
    model_path = path if path.is_file() else folder / "model.zip"
    record_path = folder / "policy.json"
    if not model_path.is_file() or not record_path.is_file():
        raise ConfigError(
            f"The sb3 agent expects policy= to be a run folder of `searchgym train --algorithm sb3-ppo` "
            f"(with model.zip and policy.json) or its model.zip, got {str(policy)!r} (missing "
            f"{model_path if not model_path.is_file() else record_path})."
        )
    record = json.loads(record_path.read_text())
    return algorithm_class(record["algorithm"]).load(model_path, device=device), record


class SB3Agent(Agent):
    """Plays a template policy (see the module docstring).

    Args:
        model: A loaded SB3 model (anything with ``predict(obs, deterministic=)``).
        protocol: The env's protocol.
        corpus: The env's corpus (passages are looked up by the ids the env reports).
        top_k, max_turns, max_searches: The env's settings (``top_k`` must match the
            policy's training env: it fixes the observation and action sizes).
        max_steps: Templates per episode before the final one is forced (the training
            wrapper's).
        lm: The reader answering the final template in protocols whose agent answers.
        generator: Instead of ``lm``, a callable ``(question, docs) -> answer`` that does
            not read the gold answers.
        max_new_tokens, temperature, seed: The reader's sampling.
        deterministic: Take the policy's most likely template (default) or sample.
    """

    name = "sb3"

    def __init__(
        self,
        model: Any,
        protocol: Any,
        corpus: Any,
        *,
        top_k: int,
        max_turns: int,
        max_searches: int | None = None,
        max_steps: int,
        lm: LanguageModel | None = None,
        generator: Any = None,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        seed: int | None = None,
        deterministic: bool = True,
    ):
        self.model = model
        self.protocol = protocol
        self.corpus = corpus
        self._settings = {"top_k": top_k, "max_turns": max_turns, "max_searches": max_searches, "max_steps": max_steps}
        probe = TemplateState(protocol, **self._settings)
        space = getattr(model, "observation_space", None)
        if space is not None and tuple(space.shape) != (probe.num_features,):
            raise ConfigError(
                f"This sb3 policy reads {space.shape[0]} features but the env (top_k={top_k}) gives {probe.num_features}; "
                "benchmark it on an env with the top_k it was trained with."
            )
        if not protocol.answers_with_generator:
            if generator is not None and getattr(generator, "uses_gold", False):
                raise ConfigError("The sb3 agent's generator must not read the gold answers (gold-span does); pass lm= or a model's generator.")
            if lm is None and generator is None:
                raise ConfigError(
                    f"In the {protocol.name!r} protocol the sb3 agent answers itself: pass lm= (the reader, as for "
                    "naive-rag) or generator=<callable (question, docs) -> answer>."
                )
            if lm is not None and not isinstance(lm, LanguageModel):
                raise ConfigError(f"SB3Agent expects lm to be a searchgym LanguageModel, got {type(lm).__name__}.")
        self.lm = lm
        self.generator = generator
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.seed = seed
        self.deterministic = deterministic
        self._states: dict[int, TemplateState] = {}
        self._trajectories: dict[int, Trajectory] = {}
        self._infos: dict[int, Mapping[str, Any]] = {}  # each slot's last info: the reader's per-episode seeds
        self._calls = 0
        self._calls_lock = threading.Lock()

    @classmethod
    def for_env(cls, env: Any, *, policy: Any = None, lm: LanguageModel | None = None, device: str = "cpu", **options: Any) -> SB3Agent:
        """The agent for ``env`` with the policy of a run folder (``policy=``) or a loaded model."""
        if policy is None:
            raise ConfigError("The sb3 agent needs policy=<run folder of `searchgym train --algorithm sb3-ppo`> (bench: --agent-option sb3:policy=RUN).")
        if isinstance(policy, (str, Path)):
            model, record = load_policy(policy, device=device)
            max_steps = options.pop("max_steps", None) or record.get("wrapper", {}).get("max_steps")
        else:
            model, max_steps = policy, options.pop("max_steps", None)
        inner = search_env(env)
        return cls(
            model, inner.protocol, inner.corpus, top_k=inner.top_k, max_turns=inner.max_turns, max_searches=inner.max_searches,
            max_steps=max_steps or inner.max_turns * (inner.top_k + 1), lm=lm, **options,
        )

    def end_episode(self, slot: int) -> Trajectory | None:
        self._states.pop(slot, None)
        self._infos.pop(slot, None)
        return self._trajectories.pop(slot, None)

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        return self.act_with_generations(observations, infos)[0]

    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Generation | None]]:
        """The turns and, aligned with them, the reader's generations (``None`` where the
        policy searched or selected, or a ``generator=`` callable answered)."""
        self._check_batch(observations, infos)
        slots = []
        for position, info in enumerate(infos):
            slot = info.get("slot", position)
            slots.append(slot)
            self._infos[slot] = info
            if info.get("turn", 0) == 0 or slot not in self._states:
                if "question" not in info:
                    raise ConfigError(f"SB3Agent.act expects the reset info (with 'question') on an episode's first turn, got keys {sorted(info)}.")
                state = TemplateState(self.protocol, **self._settings)
                state.reset(info["question"], *window_passages(self.corpus, info))
                self._states[slot] = state
            else:
                self._states[slot].follow(info, self.corpus)
        turns: dict[int, str] = {}
        generated: dict[int, Generation] = {}
        to_answer: list[int] = []
        pending = list(slots)
        while pending:
            obs = np.stack([self._states[s].features() for s in pending])
            actions, _ = self.model.predict(obs, deterministic=self.deterministic)
            still = []
            for slot, action in zip(pending, np.asarray(actions).reshape(-1)):
                decision = self._states[slot].decide(int(action))
                if decision.turn is not None:
                    turns[slot] = decision.turn
                elif decision.final:
                    to_answer.append(slot)
                else:
                    still.append(slot)
            pending = still
        if to_answer:
            answers, generations = self._answers(to_answer)
            for slot, answer, g in zip(to_answer, answers, generations):
                state = self._states[slot]
                turns[slot] = state.answer_turn(answer, state.context())
                generated[slot] = g
        return [turns[s] for s in slots], [generated.get(s) for s in slots]

    def _answers(self, slots: Sequence[int]) -> tuple[list[str], list[Generation | None]]:
        states = [self._states[s] for s in slots]
        if self.lm is None:
            return [answer_with(self.generator, state.question, state.context(), ()) for state in states], [None] * len(slots)
        prompts = []
        for slot, state in zip(slots, states):
            texts = [doc_text(p) for p in state.context()]
            ids = tuple(self.lm.tokenizer.encode(self.lm.apply_chat(generator_messages(state.question, texts)), add_special_tokens=False))
            self._trajectories[slot] = Trajectory(ids)
            prompts.append(list(ids))
        with self._calls_lock:
            call = self._calls
            self._calls += 1
        seed = None if self.seed is None else [turn_seed(self.seed, self._infos.get(slot, {}), "call", call, i) for i, slot in enumerate(slots)]
        generations = self.lm.generate(prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=seed)
        for slot, g in zip(slots, generations):
            self._trajectories[slot].add_generated(g.token_ids, g.logprobs, g.finish_reason)
        return [clean_answer(g.text) for g in generations], list(generations)
