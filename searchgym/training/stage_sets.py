"""R1-Searcher's stage sets, picked by difficulty: ``searchgym stage-sets``.

R1-Searcher does not train both curriculum stages on the same questions (§3.1, Table 1;
README "Data"): a model (Qwen-2.5-7B-Instruct in the paper) plays rollouts of every
training question, and a question's difficulty is the number of rollouts it takes to
answer it correctly: *easy* under 10, *medium* 10 to 20, *difficult* more than 20. Stage 1
trains on medium questions only (350 of them: 200 HotpotQA, 150 2Wiki, the released
``data/training_set/stage_1.jsonl``); stage 2 on medium and difficult ones (8,148:
2,561 + 2,000 HotpotQA, 1,087 + 2,500 2Wiki, ``stage_2.jsonl``). Easy questions are left out.

:func:`stage_sets` applies that rule with any model, env and dataset: rollout ``r`` of a
question is played with seed ``seed * 1_000_003 + r`` (reset and sampling), the rollouts
needed is one plus the index of the first rollout whose answer is correct
(``metric``, strict cover-EM by default: R1-Searcher's ACC_R, a hedge counting as wrong),
and a question no rollout answers needs "more than ``rollouts``". ``rollouts`` must exceed
``difficult_above`` (21 with the paper's thresholds, the default), so that every question
lands in its category: one unsolved in 21 rollouts needs more than 20. Smaller budgets go
with smaller thresholds (``--rollouts 8 --easy-below 3 --difficult-above 6``).

The folder it writes: ``stage1.jsonl`` and ``stage2.jsonl`` (QA files, each question's
``rollouts_needed`` and ``difficulty`` added to its metadata), ``difficulty.jsonl`` (every
question's correct/wrong per rollout) and ``config.json``. ``Args.stage_sets`` (``searchgym
train --preset r1-searcher --stage-sets DIR``) trains each stage on its file. The paper
sampled fixed counts from each category; every question of a category is kept here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, UnknownNameError, reports_missing_extras

#: The files of a stage-sets folder, by stage.
STAGE_FILES = {1: "stage1.jsonl", 2: "stage2.jsonl"}
#: Difficulty categories, easiest first.
DIFFICULTIES = ("easy", "medium", "difficult")
#: The categories each stage trains on (R1-Searcher's Table 1).
STAGE_DIFFICULTIES = {1: ("medium",), 2: ("medium", "difficult")}
#: Scores of an episode that can mark a rollout correct (1.0), all strict (a hedge scores 0).
METRICS = ("cover_em", "em", "gen_acc")


@dataclass
class StageSetArgs:
    """Settings of ``searchgym stage-sets``."""

    model: str = "smollm2"
    """The model whose rollouts measure difficulty (the paper: Qwen-2.5-7B-Instruct): a name, a folder or a cached HF id."""
    backend: str = "transformers"
    """Backend of the model: transformers, vllm or openai."""
    env_id: str = "searchgym/R1Searcher-v0"
    """Env whose protocol the rollouts play."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """Extra gym.make arguments, e.g. {"corpus": "wiki-vital", "max_turns": 4}."""
    dataset: str | None = None
    """The questions to sort (a built-in dataset name or a QA file); None: the env's default."""
    split: str = "train"
    """Split of the dataset."""
    limit: int | None = None
    """Score the first N questions only (all when None)."""
    rollouts: int | None = None
    """Rollouts per question; None: difficult_above + 1, the fewest that sort every question."""
    easy_below: int = 10
    """A question answered within fewer rollouts than this is easy (the paper: 10)."""
    difficult_above: int = 20
    """A question needing more rollouts than this (or never answered) is difficult (the paper: 20)."""
    metric: str = "cover_em"
    """What makes a rollout correct: cover_em (R1-Searcher's ACC_R), em or gen_acc; strict (a hedge is wrong)."""
    temperature: float = 1.0
    """Rollout sampling temperature (> 0: the rollouts must differ)."""
    max_new_tokens: int = 512
    """Most tokens per agent turn."""
    num_envs: int = 16
    """Episodes live at once (the LM batch size)."""
    seed: int = 0
    """Seed of the rollouts."""
    out: str = "runs/stage-sets"
    """Output folder: stage1.jsonl, stage2.jsonl, difficulty.jsonl, config.json."""

    def budget(self) -> int:
        """The rollouts per question."""
        return self.difficult_above + 1 if self.rollouts is None else self.rollouts


def check_stage_set_args(args: StageSetArgs) -> None:
    """Reject bad settings before any model loads."""
    from searchgym.envs.registration import full_env_id

    full_env_id(args.env_id)
    if args.metric not in METRICS:
        raise UnknownNameError("stage-sets metric", args.metric, METRICS)
    for name in ("easy_below", "difficult_above", "num_envs", "max_new_tokens"):
        value = getattr(args, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"StageSetArgs.{name} expects a positive integer, got {value!r}.")
    for name in ("rollouts", "limit"):
        value = getattr(args, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"StageSetArgs.{name} expects a positive integer or None, got {value!r}.")
    if args.easy_below > args.difficult_above + 1:
        raise ConfigError(
            f"StageSetArgs expects easy_below <= difficult_above + 1 (easy: fewer than easy_below rollouts, difficult: more "
            f"than difficult_above), got easy_below={args.easy_below}, difficult_above={args.difficult_above}."
        )
    if args.budget() <= args.difficult_above:
        raise ConfigError(
            f"StageSetArgs.rollouts ({args.budget()}) must exceed difficult_above ({args.difficult_above}): a question no rollout "
            f"answers would be medium or difficult alike. Pass --rollouts {args.difficult_above + 1} or more, or a smaller "
            "--difficult-above (and --easy-below)."
        )
    if not args.temperature > 0:
        raise ConfigError(f"StageSetArgs.temperature expects a positive number (greedy rollouts are all the same), got {args.temperature!r}.")
    if not isinstance(args.env_options, dict):
        raise ConfigError(f"StageSetArgs.env_options expects a dict, got {type(args.env_options).__name__}.")


def rollouts_needed(correct: Sequence[bool]) -> int | None:
    """One plus the index of the first correct rollout; None if none is correct."""
    return next((i + 1 for i, ok in enumerate(correct) if ok), None)


def difficulty(needed: int | None, *, easy_below: int = 10, difficult_above: int = 20) -> str:
    """R1-Searcher's category of a question answered first at rollout ``needed`` (None: never)."""
    if needed is None or needed > difficult_above:
        return "difficult"
    return "easy" if needed < easy_below else "medium"


def stage_file(folder: str | Path, stage: int) -> Path:
    """The questions file of ``stage`` (1 or 2) in a stage-sets folder."""
    return Path(folder) / STAGE_FILES[stage]


def check_stage_sets(folder: str | Path) -> None:
    """A :class:`ConfigError` unless ``folder`` holds both stage files, each with questions."""
    for stage in STAGE_FILES:
        path = stage_file(folder, stage)
        if not path.is_file():
            raise ConfigError(
                f"Args.stage_sets expects a folder written by `searchgym stage-sets` (with {', '.join(STAGE_FILES.values())}), "
                f"but {path} does not exist; run `searchgym stage-sets --model M --out {folder}` first."
            )
        with path.open("rb") as f:
            if not f.read(1):
                raise ConfigError(
                    f"Args.stage_sets: {path} holds no questions (no question of the scored ones was "
                    f"{' or '.join(STAGE_DIFFICULTIES[stage])}); score more questions, or with thresholds that suit the model."
                )


@reports_missing_extras("searchgym.training.stage_sets.stage_sets")
def stage_sets(args: StageSetArgs, *, lm: Any = None, progress: bool = True) -> dict[str, int]:
    """Score the questions by rollouts and write the folder (see the module docstring).

    ``lm``: a loaded :class:`~searchgym.lm.base.LanguageModel` to use instead of loading
    ``args.model``. Returns the number of questions per difficulty and per stage file.
    """
    import gymnasium as gym

    from searchgym.agents import Task, run_episodes
    from searchgym.agents.lm_agents import policy_agent
    from searchgym.corpora.datasets import write_qa
    from searchgym.envs.access import search_env
    from searchgym.envs.registration import full_env_id
    from searchgym.lm.registry import load_lm
    from searchgym.bench import write_atomically

    check_stage_set_args(args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"The stage-sets output folder {out} is a file; pick another --out.")
    env_id = full_env_id(args.env_id)
    options = {"split": args.split, **args.env_options}
    if args.dataset is not None:
        options["dataset"] = args.dataset
    envs = [gym.make(env_id, **options) for _ in range(args.num_envs)]
    examples = search_env(envs[0]).examples[: args.limit]
    if lm is None:
        lm = load_lm(args.model, backend=args.backend)
    agent = policy_agent(envs[0], lm, max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=1.0, seed=args.seed)
    budget = args.budget()
    tasks = [Task(ex.id, seed=(args.seed * 1_000_003 + r) % (2**31)) for ex in examples for r in range(budget)]
    results = run_episodes(envs[: len(tasks)], agent, tasks, progress=progress, desc="stage-sets rollouts")

    counts = {d: 0 for d in DIFFICULTIES}
    scored: list[dict[str, Any]] = []
    by_stage: dict[int, list[Any]] = {stage: [] for stage in STAGE_FILES}
    for i, ex in enumerate(examples):
        correct = [getattr(r, args.metric) >= 1.0 for r in results[i * budget : (i + 1) * budget]]
        needed = rollouts_needed(correct)
        category = difficulty(needed, easy_below=args.easy_below, difficult_above=args.difficult_above)
        counts[category] += 1
        scored.append({"id": ex.id, "question": ex.question, "rollouts_needed": needed, "difficulty": category, "correct": correct})
        tagged = dataclasses.replace(ex, metadata={**ex.metadata, "rollouts_needed": needed, "difficulty": category})
        for stage, kept in STAGE_DIFFICULTIES.items():
            if category in kept:
                by_stage[stage].append(tagged)

    out.mkdir(parents=True, exist_ok=True)
    for stage, chosen in by_stage.items():
        write_qa(chosen, stage_file(out, stage))
    write_atomically(out / "difficulty.jsonl", "".join(json.dumps(row) + "\n" for row in scored))
    record = {**dataclasses.asdict(args), "rollouts": budget, "counts": counts}
    write_atomically(out / "config.json", json.dumps(record, indent=2))
    return {**counts, "stage1": len(by_stage[1]), "stage2": len(by_stage[2])}
