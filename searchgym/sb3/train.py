"""Classic RL on the search env: Stable-Baselines3 PPO or DQN over template actions.

``searchgym train --algorithm sb3-ppo`` (or ``sb3-dqn``) trains an MLP policy on
:class:`~searchgym.sb3.env.TemplateActions` (numeric features, ``Discrete``
templates) and writes, under ``out``:

- ``model.zip``: the SB3 model, saved atomically at every evaluation and at the end; a
  run folder with one continues from it when the command is run again;
- ``policy.json``: what :class:`~searchgym.sb3.agent.SB3Agent` needs to play it in
  ``searchgym bench`` (algorithm, env id and options, wrapper options, timesteps done);
- ``metrics.csv`` and ``curves.png``: training episode reward and greedy evaluation on the
  held-out split (reward, share of episodes whose answer was right, searches, answer-context
  passages, invalid templates) against timesteps.

    from searchgym.sb3 import SB3Args, train_sb3
    rows = train_sb3(SB3Args(total_timesteps=30_000, out="runs/sb3"))
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from searchgym.envs.registration import env_spec, full_env_id
from searchgym.error import ConfigError, UnknownNameError
from searchgym.progress import Progress
from searchgym.sb3.algorithms import SB3_ALGORITHMS, SB3_DEFAULTS, algorithm_class
from searchgym.sb3.env import TemplateActions
from searchgym.training.metrics import MetricsLog, plot_curves

@dataclass
class SB3Args:
    """Settings of a ``searchgym train --algorithm sb3-ppo|sb3-dqn`` run."""

    algorithm: str = "sb3-ppo"
    """sb3-ppo (Stable-Baselines3 PPO) or sb3-dqn (DQN), over TemplateActions."""
    env_id: str = "searchgym/SearchR1-v0"
    """Environment id (any protocol; the s3 protocol's own generator answers there)."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """Extra gym.make arguments, e.g. {"corpus_options": {"seed": 1}}."""
    train_split: str = "train"
    """Dataset split the policy is trained on."""
    eval_split: str = "dev"
    """Held-out split of the periodic greedy evaluation."""
    train_limit: int | None = None
    """Train on the first N questions of the split only (all when None)."""
    eval_limit: int | None = 100
    """Evaluate on the first N questions of the eval split (all when None)."""
    generator: str = "gold-span"
    """Frozen generator answering the final template in answering protocols during training
    (gold-span: right exactly when a selected passage holds a gold answer; LM-free)."""
    invalid_penalty: float = 0.05
    """Reward subtracted per template that could not run."""
    passage_cost: float = 0.05
    """Reward subtracted per passage the final answer is generated from (precise selections read better)."""
    max_steps: int | None = None
    """Templates per episode before the final one is forced (None: max_turns * (top_k + 1))."""
    total_timesteps: int = 30_000
    """Templates played in training (SB3 timesteps)."""
    num_envs: int = 4
    """Training envs stepped together (a DummyVecEnv)."""
    lr: float = 3e-4
    """Learning rate."""
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden layer sizes of the MLP policy (and value / Q network)."""
    sb3_options: dict[str, Any] = field(default_factory=dict)
    """Extra constructor arguments of the SB3 algorithm, e.g. {"ent_coef": 0.02} (defaults: SB3_DEFAULTS)."""
    eval_every: int = 5_000
    """Evaluate (and save model.zip) every this many timesteps."""
    out: str = "runs/sb3"
    """Run folder: model.zip, policy.json, metrics.csv, curves.png."""
    seed: int = 0
    """Seed of the envs, the policy's initialization and its exploration."""
    device: str = "cpu"
    """Torch device of the policy (cpu is fastest for these small MLPs)."""
    progress: bool = True
    """Show progress: timesteps, phase and policy updates (a plain line every
    SEARCHGYM_PROGRESS_SECONDS, default 5, when stderr is not a terminal)."""


def check_sb3_args(args: SB3Args) -> None:
    """Reject a bad configuration before any env is built."""
    if args.algorithm not in SB3_ALGORITHMS:
        raise UnknownNameError("Stable-Baselines3 algorithm", args.algorithm, SB3_ALGORITHMS)
    for name in ("total_timesteps", "num_envs", "eval_every"):
        value = getattr(args, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"SB3Args expects {name} to be a positive integer, got {value!r}.")
    for name in ("train_limit", "eval_limit", "max_steps"):
        value = getattr(args, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"SB3Args expects {name} to be a positive integer or None, got {value!r}.")
    if not (isinstance(args.lr, (int, float)) and math.isfinite(args.lr) and args.lr > 0):
        raise ConfigError(f"SB3Args expects lr to be a positive number, got {args.lr!r}.")
    if not args.net_arch or not all(isinstance(n, int) and n > 0 for n in args.net_arch):
        raise ConfigError(f"SB3Args expects net_arch to be a list of positive layer sizes like [64, 64], got {args.net_arch!r}.")
    if not isinstance(args.sb3_options, dict) or not isinstance(args.env_options, dict):
        raise ConfigError("SB3Args expects env_options and sb3_options to be dicts (JSON objects on the command line).")
    reserved = sorted({"policy", "env", "learning_rate", "seed", "device", "policy_kwargs"} & set(args.sb3_options))
    if reserved:
        raise ConfigError(f"SB3Args sb3_options cannot set {reserved}; use the flags --lr, --seed, --device, --net-arch instead.")


def make_template_env(env_id: str, env_options: dict[str, Any], *, split: str, limit: int | None = None, **wrapper: Any) -> Any:
    """``TemplateActions(gym.make(env_id, split=split, **env_options))``, keeping the first
    ``limit`` questions of the split."""
    env = gym.make(full_env_id(env_id), split=split, **{**env_options, **({"limit": limit} if limit is not None else {})})
    return TemplateActions(env, **wrapper)


def _wrapper_options(args: SB3Args, env_id: str) -> dict[str, Any]:
    answers_itself = env_spec(env_id).get("protocol") == "s3" or args.env_options.get("protocol") == "s3"
    return {
        "generator": None if answers_itself else args.generator,
        "max_steps": args.max_steps,
        "invalid_penalty": args.invalid_penalty,
        "passage_cost": args.passage_cost,
    }


def evaluate_template_policy(model: Any, env: Any, *, deterministic: bool = True) -> dict[str, float]:
    """Play every question of ``env`` (a TemplateActions) once with ``model.predict``: mean
    reward, share answered right (the env's EM / s3 GenAcc component when it reports one,
    else reward > 0), searches, passages answered from and invalid templates per episode."""
    inner = env.text_env
    totals = {"reward": 0.0, "success": 0.0, "searches": 0.0, "passages": 0.0, "invalid": 0.0, "templates": 0.0}
    n = len(inner.examples)
    for i in range(n):
        obs, info = env.reset(options={"example_index": i})
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, reward, terminated, truncated, info = env.step(int(action))
            total += reward
            done = terminated or truncated
        totals["reward"] += total
        totals["success"] += answered_right(info.get("reward_components", {}), total)
        totals["searches"] += info["num_searches"]
        totals["passages"] += env.context_passages
        totals["invalid"] += env.state.num_invalid
        totals["templates"] += env.state.steps
    return {k: v / n for k, v in totals.items()}


def answered_right(components: dict[str, float], reward: float) -> float:
    """1.0 when an episode's answer was right: its EM, s3 GenAcc or cover-EM component;
    F1 above 0.5 for recipes scoring F1 only; else a positive reward."""
    for key in ("em", "gen_acc", "cover_em"):
        if key in components:
            return float(components[key] > 0)
    for key in ("answer_f1", "f1"):
        if key in components:
            return float(components[key] > 0.5)
    return float(reward > 0)


#: metrics.csv columns.
COLUMNS = (
    "step", "episodes", "train_reward", "eval_reward", "eval_success", "eval_searches", "eval_passages",
    "eval_invalid", "eval_templates", "seconds",
)

PANELS = (
    ("reward", [("train_reward", "train (last 100 episodes)"), ("eval_reward", "eval (greedy, held out)")]),
    ("answered right (eval)", [("eval_success", "share of questions")]),
    ("per episode (eval)", [("eval_searches", "searches"), ("eval_passages", "passages answered from"), ("eval_invalid", "invalid templates")]),
)


def _atomic_save(model: Any, path: Path) -> None:
    tmp = path.with_name(path.stem + ".tmp.zip")
    model.save(tmp)
    os.replace(tmp, path)


def train_sb3(args: SB3Args) -> list[dict[str, Any]]:
    """Train (or continue) the run in ``args.out``; the metrics rows logged so far."""
    check_sb3_args(args)
    cls = algorithm_class(args.algorithm)
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    env_id = full_env_id(args.env_id)
    wrapper = _wrapper_options(args, env_id)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_path, policy_path = out / "model.zip", out / "policy.json"

    def make() -> Any:
        return make_template_env(env_id, args.env_options, split=args.train_split, limit=args.train_limit, **wrapper)

    vec = make_vec_env(make, n_envs=args.num_envs, seed=args.seed)
    eval_env = make_template_env(env_id, args.env_options, split=args.eval_split, limit=args.eval_limit, **wrapper)

    done_steps = 0
    if model_path.is_file() and policy_path.is_file():
        record = json.loads(policy_path.read_text())
        if record.get("algorithm") != args.algorithm or record.get("env_id") != env_id:
            raise ConfigError(
                f"{out} holds a {record.get('algorithm')} run on {record.get('env_id')}; continue it with the same "
                "--algorithm and --env-id, or pick another --out."
            )
        model = cls.load(model_path, env=vec, device=args.device)
        done_steps = int(model.num_timesteps)
        print(f"continuing {model_path} from timestep {done_steps}")
    else:
        options = {**SB3_DEFAULTS[args.algorithm], **args.sb3_options}
        model = cls(
            "MlpPolicy", vec, learning_rate=args.lr, seed=args.seed, device=args.device,
            policy_kwargs={"net_arch": list(args.net_arch)}, verbose=0, **options,
        )
    log = MetricsLog(out / "metrics.csv", COLUMNS, resume_step=done_steps)
    started = time.perf_counter()

    def save(timesteps: int) -> None:
        _atomic_save(model, model_path)
        record = {
            "algorithm": args.algorithm,
            "env_id": env_id,
            "env_options": args.env_options,
            "wrapper": wrapper,
            "top_k": eval_env.text_env.top_k,
            "num_actions": int(eval_env.action_space.n),
            "num_features": int(eval_env.observation_space.shape[0]),
            "timesteps": timesteps,
            "args": asdict(args),
        }
        tmp = policy_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=2, default=str))
        os.replace(tmp, policy_path)

    counted = {"episodes": int(log.rows[-1]["episodes"]) if log.rows else 0, "updates": 0}
    # Timesteps on a bar (a plain line every few seconds when stderr is a file), with the
    # phase and the number of policy updates: SB3's own bar writes nothing to a file.
    bar = Progress(args.total_timesteps, f"{args.algorithm} train", "timestep", initial=done_steps) if args.progress else None

    def phase(text: str | None) -> None:
        if bar is not None:
            bar.note(phase=text)

    def evaluate(timesteps: int) -> None:
        phase("evaluate")
        stats = evaluate_template_policy(model, eval_env)
        episodes = [e["r"] for e in list(model.ep_info_buffer or [])]
        log.log({
            "step": timesteps,
            "episodes": counted["episodes"],
            "train_reward": sum(episodes) / len(episodes) if episodes else float("nan"),
            **{f"eval_{k}": v for k, v in stats.items() if k != "reward"},
            "eval_reward": stats["reward"],
            "seconds": time.perf_counter() - started,
        })
        save(timesteps)
        plot_curves(log.rows, out / "curves.png", title=f"{args.algorithm} on {env_id} (eval: {args.eval_split})", panels=PANELS)
        if bar is not None:
            bar.note(phase="rollout", eval_reward=f"{stats['reward']:.3f}")

    class Periodic(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next_eval = (done_steps // args.eval_every + 1) * args.eval_every

        def _on_step(self) -> bool:
            counted["episodes"] += int(sum(self.locals.get("dones", ())))
            if bar is not None:
                bar.update(self.num_timesteps - bar.n)
            if self.num_timesteps >= self.next_eval:
                evaluate(self.num_timesteps)
                self.next_eval += args.eval_every
            return True

        def _on_rollout_start(self) -> None:
            phase("rollout")

        def _on_rollout_end(self) -> None:  # the policy update follows (PPO's epochs, DQN's gradient steps)
            counted["updates"] += 1
            if bar is not None:
                bar.note(phase="update", updates=counted["updates"])

    try:
        if done_steps == 0:
            evaluate(0)  # the untrained policy: the curve's starting point
        remaining = args.total_timesteps - done_steps
        if remaining > 0:
            model.learn(remaining, callback=Periodic(), reset_num_timesteps=False)
            if not log.rows or log.rows[-1]["step"] != model.num_timesteps:
                evaluate(model.num_timesteps)
    finally:
        if bar is not None:
            bar.close()
    log.close()
    vec.close()
    return log.rows
