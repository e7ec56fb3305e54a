"""verl's agent loop over a searchgym env: one episode per dataset row.

verl's ``AgentLoopWorker`` instantiates :class:`SearchGymAgentLoop` for every row whose
``agent_name`` is ``"searchgym"`` and awaits :meth:`~SearchGymAgentLoop.run`, which

1. reads the row's question (:func:`~searchgym.integrations.verl.data.example_from_row`)
   and resets a searchgym env to it;
2. tokenizes the env's prompt as searchgym's LM agents do (:mod:`searchgym.agents.tokens`);
3. turn by turn, generates through verl's server manager with the protocol's stop strings,
   steps the env with the turn's text in a worker thread (a step may call a retriever
   server or a frozen LM), and appends the tokenized observation;
4. returns verl's ``AgentLoopOutput``: the prompt ids, the response ids (the sampled ids
   exactly as the engine returned them, and the observation ids), ``response_mask`` (1 on
   sampled ids, 0 on observation ids, searchgym's ``Trajectory.loss_mask``), the sampled
   logprobs and the env's reward.

Configure it in verl's ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` file
(``agent_loop.yaml`` beside this module)::

    - name: searchgym
      _target_: searchgym.integrations.verl.agent_loop.SearchGymAgentLoop
      env_id: searchgym/SearchR1-v0
      env_kwargs: {retriever: http://127.0.0.1:8000/retrieve}
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import uuid4

from omegaconf import DictConfig, ListConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from searchgym.agents.tokens import encode_text, prompt_ids
from searchgym.agents.trajectory import Trajectory
from searchgym.envs.access import search_env
from searchgym.error import ConfigError
from searchgym.integrations.verl.data import AGENT_NAME, example_from_row
from searchgym.lm.base import derive_seed, stop_end

#: Keys of ``extra_fields["reward_extra_info"]``: the same for every episode, so that verl
#: can stack them over a batch (a recipe's own components are in ``reward_components``).
REWARD_INFO_KEYS = ("score", "answered", "num_turns", "num_searches", "num_invalid", "cut_by_length")


class EnvPool:
    """Idle searchgym envs by (id, arguments), shared by the loops of one worker process.

    verl builds an agent loop per row; envs (corpus, retriever index) are built once per
    concurrent episode and reused. Their retriever is coalesced
    (:func:`searchgym.corpora.coalesce.coalesced`): the searches of episodes stepping in worker
    threads at the same time go out as one call, as ``searchgym serve`` joins requests.
    """

    def __init__(self) -> None:
        self._idle: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(env_id: str, env_kwargs: Mapping[str, Any]) -> str:
        return json.dumps([env_id, env_kwargs], sort_keys=True, default=repr)

    def acquire(self, env_id: str, env_kwargs: Mapping[str, Any]) -> Any:
        with self._lock:
            idle = self._idle.get(self.key(env_id, env_kwargs))
            if idle:
                return idle.pop()
        import gymnasium as gym

        from searchgym.corpora.coalesce import coalesced
        from searchgym.envs import search_env

        env = gym.make(env_id, **dict(env_kwargs))
        # The episodes step in worker threads: their searches join in one call while one runs.
        inner = search_env(env)
        inner.retriever = coalesced(inner.retriever)
        return env

    def release(self, env_id: str, env_kwargs: Mapping[str, Any], env: Any) -> None:
        with self._lock:
            self._idle.setdefault(self.key(env_id, env_kwargs), []).append(env)


ENV_POOL = EnvPool()


def plain_config(value: Any) -> Any:
    """OmegaConf containers (what hydra hands the loop) as plain dicts and lists."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _positive_int_or_none(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"SearchGymAgentLoop expects {name} to be a positive integer or null, got {value!r}.")
    return value


def action_text(tokenizer: Any, token_ids: Sequence[int], stop: Sequence[str]) -> str:
    """The env action of one generated turn, as searchgym's LM backends give it: the decoded
    ids without trailing special tokens (end of sequence), cut after the first stop string."""
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    end = len(token_ids)
    while end and token_ids[end - 1] in special:
        end -= 1
    text = tokenizer.decode(list(token_ids[:end]), clean_up_tokenization_spaces=False)
    cut = stop_end(text, stop)
    return text if cut is None else text[:cut]


@register(AGENT_NAME)
class SearchGymAgentLoop(AgentLoopBase):
    """Plays one searchgym episode per row through verl's server manager (see the module docstring).

    Args (the keys of its entry in verl's agent-loop config file, besides verl's own):
        env_id: The registered env (e.g. ``searchgym/SearchR1-v0``). ``None``: the row's
            ``extra_info.env_id`` (rows written by ``prepare`` carry it).
        env_kwargs: ``gym.make`` arguments (``retriever: http://host:port/retrieve``,
            ``corpus``, ``top_k``, ``max_turns``, ...).
        max_tokens_per_turn: Most tokens generated in one turn (``None``: what is left of
            ``rollout.response_length``, the budget of the whole response).
        chat: Format the prompt with the chat template; ``None`` follows the protocol.
    """

    def __init__(
        self,
        *args: Any,
        env_id: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        max_tokens_per_turn: int | None = None,
        chat: bool | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.env_id = env_id
        self.env_kwargs = dict(plain_config(env_kwargs) or {})
        self.max_tokens_per_turn = _positive_int_or_none("max_tokens_per_turn", max_tokens_per_turn)
        self.chat = chat
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.template_options = dict(plain_config(self.apply_chat_template_kwargs) or {})

    def _env_id(self, row_env_id: Any) -> str:
        from searchgym.envs.registration import full_env_id

        if self.env_id is None and not row_env_id:
            raise ConfigError(
                "SearchGymAgentLoop expects an env id: set env_id in the agent-loop config file "
                "(e.g. env_id: searchgym/SearchR1-v0) or write rows with `python -m searchgym.integrations.verl prepare`, "
                "which records it in extra_info.env_id; got neither."
            )
        if self.env_id is not None and row_env_id and full_env_id(str(row_env_id)) != full_env_id(self.env_id):
            raise ConfigError(
                f"SearchGymAgentLoop plays {self.env_id} (env_id of the agent-loop config), got a row prepared for {row_env_id}. "
                "Prepare the data for the same env, or drop env_id from the config to follow the rows."
            )
        return full_env_id(self.env_id or str(row_env_id))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        example = example_from_row(kwargs, where="verl row", line=_int_or_none(kwargs.get("index")))
        extra = kwargs.get("extra_info") or {}
        env_id = self._env_id(extra.get("env_id") if isinstance(extra, Mapping) else None)
        loop = asyncio.get_running_loop()
        env = await loop.run_in_executor(None, ENV_POOL.acquire, env_id, self.env_kwargs)
        try:
            return await self._play(env, example, sampling_params)
        finally:
            ENV_POOL.release(env_id, self.env_kwargs, env)

    def _start(self, env: Any, example: Any) -> tuple[list[int], Any]:
        """Reset ``env`` to ``example``; the prompt ids and the protocol."""
        policy = getattr(getattr(search_env(env), "game", None), "context_policy", None)
        if policy is not None and policy.name != "keep":
            # verl (0.9) stacks one AgentLoopOutput per dataset row: an episode of several records
            # (one per rewritten conversation) has no place in that batch (docs/long-horizons.md).
            raise ConfigError(
                f"SearchGymAgentLoop plays one token record per row, and verl's agent loop returns one AgentLoopOutput per row; "
                f"an env with context={policy.name!r} rewrites its conversation into several records. Drop context from "
                "env_kwargs (keep), or train it with searchgym train, which trains every record of an episode."
            )
        prompt, info = env.reset(seed=derive_seed("verl", example.id) % 2**32, options={"example": example})
        protocol = search_env(env).protocol
        chat = protocol.uses_chat_template if self.chat is None else bool(self.chat)
        ids = list(prompt_ids(self.tokenizer, prompt, info, chat=chat, **self.template_options))
        if len(ids) > self.prompt_length:
            raise ConfigError(
                f"SearchGymAgentLoop got a prompt of {len(ids)} tokens for question {example.id!r}, over "
                f"rollout.prompt_length={self.prompt_length}. Raise data.max_prompt_length (it sets rollout.prompt_length)."
            )
        return ids, protocol

    async def _play(self, env: Any, example: Any, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        ids, protocol = await loop.run_in_executor(None, self._start, env, example)
        stop = list(protocol.stop_strings)
        trajectory = Trajectory(tuple(ids))
        # Logprobs go back to verl only if every turn's server reply had them.
        have_logprobs = bool(sampling_params.get("logprobs", False))
        request_id = uuid4().hex  # one per episode: verl keeps an episode on one server (prefix cache)
        step_rewards: list[float] = []
        turns: list[dict[str, int]] = []
        info: dict[str, Any] = {}
        terminated = truncated = cut = False
        t_generate = t_env = 0.0
        while not (terminated or truncated):
            left = self.response_length - len(trajectory.response_ids)
            if left < 1:
                cut = True
                break
            max_tokens = min(left, self.max_tokens_per_turn or left)
            params = {**sampling_params, "max_tokens": max_tokens, "stop": stop}
            t0 = time.perf_counter()
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=trajectory.context_ids(), sampling_params=params)
            t_generate += time.perf_counter() - t0
            sampled = [int(t) for t in output.token_ids]
            if not sampled:  # aborted by the server (e.g. a weight sync): the episode ends here
                cut = True
                break
            have_logprobs = have_logprobs and output.log_probs is not None and len(output.log_probs) == len(sampled)
            logprobs = [float(x) for x in output.log_probs] if have_logprobs else [0.0] * len(sampled)
            finish = "length" if len(sampled) >= max_tokens else "stop"
            trajectory.add_generated(tuple(sampled), tuple(logprobs), finish)
            text = action_text(self.tokenizer, sampled, stop)
            t0 = time.perf_counter()
            observation, reward, terminated, truncated, info = await loop.run_in_executor(None, env.step, text)
            obs_ids = await loop.run_in_executor(None, encode_text, self.tokenizer, observation)
            t_env += time.perf_counter() - t0
            step_rewards.append(float(reward))
            turns.append({"generated": len(sampled), "observation": len(obs_ids)})
            trajectory.add_observation(obs_ids)

        response_ids = trajectory.response_ids
        cut = cut or len(response_ids) > self.response_length
        n = self.response_length
        score = float(sum(step_rewards))
        reward_info = {
            "score": score,
            "answered": float(bool(terminated)),
            "num_turns": float(len(turns)),
            "num_searches": float(info.get("num_searches", 0)),
            "num_invalid": float(info.get("num_invalid", 0)),
            "cut_by_length": float(cut),
        }
        return AgentLoopOutput(
            prompt_ids=list(trajectory.prompt_ids),
            response_ids=response_ids[:n],
            response_mask=trajectory.loss_mask[:n],
            response_logprobs=[lp if lp is not None else 0.0 for lp in trajectory.response_logprobs][:n] if have_logprobs else None,
            reward_score=score,
            # verl counts messages: the prompt, then each turn and each observation.
            num_turns=1 + len(turns) + sum(1 for t in turns if t["observation"]),
            metrics=AgentLoopMetrics(generate_sequences=t_generate, tool_calls=t_env),
            extra_fields={
                "turn_scores": step_rewards,
                "tool_rewards": [],
                "reward_extra_info": reward_info,
                "reward_components": dict(info.get("reward_components") or {}),
                "searchgym_turns": turns,
                "searchgym_example_id": example.id,
                "searchgym_prediction": info.get("prediction"),
                "searchgym_seconds": time.perf_counter() - started,
            },
        )


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
