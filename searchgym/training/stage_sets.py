"""R1-Searcher's stage sets, picked by difficulty: ``searchgym stage-sets``.

R1-Searcher does not train both curriculum stages on the same questions (§2.1, Table 1;
README "Data"): a model (Qwen-2.5-7B-Instruct in the paper) plays rollouts of every
training question with the paper's "System Prompt for Data Selection" (``prompt``, the
default; ``prompt="base"`` plays the training prompt instead), and a question's difficulty is the number of rollouts it takes to
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

How many questions each stage keeps (Table 1; medium + difficult):

- stage 1: HotpotQA 200 + 0, 2Wiki 150 + 0: 350 medium questions;
- stage 2: HotpotQA 2,561 + 2,000, 2Wiki 1,087 + 2,500: 3,648 medium and 4,500 difficult.

(:data:`PAPER_STAGE_COUNTS`). The paper sampled these fixed counts from larger pools;
``stage1_size`` / ``stage2_size`` (``--stage1-size 350 --stage2-size 8148`` for the paper's)
sample that many with the ``seed``, stage 2 in the paper's proportion of medium to
difficult questions (3,648 : 4,500; a category with too few questions gives its share to
the other). Each stage samples from its own pool, so a medium question may be in both, as
it may be in the paper's. ``None`` (the default) keeps every question of the stage's
categories: with a few hundred scored questions, the paper's counts are more than there is.
A size larger than the stage's pool keeps the whole pool (``config.json``'s
``stage_counts`` says how many each file got).

The folder it writes: ``stage1.jsonl`` and ``stage2.jsonl`` (QA files, each question's
``rollouts_needed`` and ``difficulty`` added to its metadata), ``difficulty.jsonl`` (every
question's correct/wrong and prediction per rollout), ``config.json`` and ``rollouts.jsonl``
(each rollout as it ends: a stopped run started again with the same ``--out`` and settings
plays only the rollouts it lacks, and loads no model when none is lacking, e.g. with a
smaller ``--limit``; a larger ``--limit`` or ``--rollouts`` adds to it).
All rollouts of all questions are played ``num_envs`` at a time, each turn of the live
episodes in one batched model call; each rollout samples from its own seeded stream, so
the sets do not depend on ``num_envs`` (with vLLM a larger batch is faster). ``Args.stage_sets`` (``searchgym
train --preset r1-searcher --stage-sets DIR``) trains each stage on its file.
"""

from __future__ import annotations

import dataclasses
import json
import random
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
#: R1-Searcher's Table 1: questions per stage and category (HotpotQA and 2Wiki summed).
PAPER_STAGE_COUNTS = {1: {"medium": 350}, 2: {"medium": 2561 + 1087, "difficult": 2000 + 2500}}
#: The R1-Searcher prompts a stage-sets run can play (:class:`~searchgym.envs.protocols.r1_searcher.R1SearcherProtocol`).
PROMPTS = ("data_selection", "base")
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
    prompt: str = "data_selection"
    """The R1-Searcher prompt of the rollouts (envs of the r1_searcher protocol): data_selection (the paper's "System
    Prompt for Data Selection", through the model's chat template) or base (the training prompt, raw text)."""
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
    """Seed of the rollouts and of the sampling of stage1_size / stage2_size questions."""
    stage1_size: int | None = None
    """Stage 1's questions, sampled from the medium ones (the paper: 350); None: every medium question."""
    stage2_size: int | None = None
    """Stage 2's questions, sampled in the paper's proportion of medium to difficult (3,648 : 4,500; the paper: 8,148); None: all of them."""
    out: str = "runs/stage-sets"
    """Output folder: stage1.jsonl, stage2.jsonl, difficulty.jsonl, config.json, rollouts.jsonl (a rerun resumes from it)."""

    def budget(self) -> int:
        """The rollouts per question."""
        return self.difficult_above + 1 if self.rollouts is None else self.rollouts


def check_stage_set_args(args: StageSetArgs) -> None:
    """Reject bad settings before any model loads."""
    from searchgym.envs.registration import full_env_id

    full_env_id(args.env_id)
    if args.metric not in METRICS:
        raise UnknownNameError("stage-sets metric", args.metric, METRICS)
    if args.prompt not in PROMPTS:
        raise UnknownNameError("stage-sets prompt", args.prompt, PROMPTS)
    for name in ("easy_below", "difficult_above", "num_envs", "max_new_tokens"):
        value = getattr(args, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"StageSetArgs.{name} expects a positive integer, got {value!r}.")
    for name in ("rollouts", "limit", "stage1_size", "stage2_size"):
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


def env_options(args: StageSetArgs) -> dict[str, Any]:
    """The ``gym.make`` arguments of the rollouts' envs: the split, ``env_options``, the
    dataset, and on an R1-Searcher env the ``prompt`` (over the env options' own)."""
    from searchgym.envs.registration import env_spec

    options = {"split": args.split, **args.env_options}
    if args.dataset is not None:
        options["dataset"] = args.dataset
    if options.get("protocol", env_spec(args.env_id).get("protocol")) == "r1_searcher":
        options["protocol_options"] = {**dict(options.get("protocol_options") or {}), "prompt": args.prompt}
    return options


def rollouts_needed(correct: Sequence[bool]) -> int | None:
    """One plus the index of the first correct rollout; None if none is correct."""
    return next((i + 1 for i, ok in enumerate(correct) if ok), None)


def difficulty(needed: int | None, *, easy_below: int = 10, difficult_above: int = 20) -> str:
    """R1-Searcher's category of a question answered first at rollout ``needed`` (None: never)."""
    if needed is None or needed > difficult_above:
        return "difficult"
    return "easy" if needed < easy_below else "medium"


def stage_shares(size: int, available: dict[str, int], proportions: dict[str, int]) -> dict[str, int]:
    """How many questions of each category a stage of ``size`` takes: ``proportions`` of it
    (rounded, the remainder to the first category), a category short of its share giving
    the rest to the others; never more than ``available`` in all."""
    total = sum(proportions.values())
    want = {c: size * n // total for c, n in proportions.items()}
    first = next(iter(proportions))
    want[first] += size - sum(want.values())
    take = {c: min(want[c], available.get(c, 0)) for c in proportions}
    short = size - sum(take.values())
    for c in proportions:  # what a category lacks, the others give, in order
        extra = min(short, available.get(c, 0) - take[c])
        take[c] += extra
        short -= extra
    return take


def pick_stage(scored: Sequence[tuple[str, Any]], stage: int, size: int | None, seed: int) -> list[Any]:
    """Stage ``stage``'s questions among ``scored`` ((category, question) in dataset order):
    every question of :data:`STAGE_DIFFICULTIES` ``[stage]`` when ``size`` is None, else
    ``size`` of them drawn with ``seed``, the categories in the proportions of
    :data:`PAPER_STAGE_COUNTS` (:func:`stage_shares`). The result keeps the dataset's order."""
    categories = STAGE_DIFFICULTIES[stage]
    pools = {c: [i for i, (category, _) in enumerate(scored) if category == c] for c in categories}
    if size is None:
        chosen = [i for c in categories for i in pools[c]]
    else:
        shares = stage_shares(size, {c: len(pool) for c, pool in pools.items()}, PAPER_STAGE_COUNTS[stage])
        rng = random.Random(f"stage-sets/{seed}/stage{stage}")
        chosen = [i for c in categories for i in rng.sample(pools[c], shares[c])]
    return [scored[i][1] for i in sorted(chosen)]


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


#: The rollouts played so far, one JSON line each after a settings line: a stopped run resumes from it.
ROLLOUTS_FILE = "rollouts.jsonl"
#: The settings a rollout depends on; a rollouts file written with others is not reused.
ROLLOUT_SETTINGS = ("model", "backend", "env_id", "env_options", "prompt", "dataset", "split", "temperature", "max_new_tokens", "seed")


def rollout_seed(seed: int, rollout: int) -> int:
    """The reset and sampling seed of rollout ``rollout`` (from 0) of every question."""
    return (seed * 1_000_003 + rollout) % (2**31)


def rollout_settings(args: StageSetArgs) -> dict[str, Any]:
    return {name: getattr(args, name) for name in ROLLOUT_SETTINGS}


def read_rollouts(out: Path, args: StageSetArgs) -> dict[tuple[str, int], dict[str, Any]]:
    """The rollouts an earlier run with the same settings left in ``out``, by (question id,
    seed); a torn last line (the run was stopped while writing it) is dropped."""
    path = out / ROLLOUTS_FILE
    if not path.is_file() or path.stat().st_size == 0:
        return {}
    lines = path.read_text().splitlines()
    try:
        header = json.loads(lines[0])["settings"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ConfigError(f"{path} does not start with the settings line stage-sets writes; delete it or pick another --out.") from e
    wanted = json.loads(json.dumps(rollout_settings(args)))
    if header != wanted:
        differ = ", ".join(f"{k}={header.get(k)!r} (now {wanted[k]!r})" for k in ROLLOUT_SETTINGS if header.get(k) != wanted[k])
        raise ConfigError(f"{path} holds rollouts played with other settings: {differ}; pick another --out, or delete the file to replay them.")
    done = {}
    for n, line in enumerate(lines[1:], 2):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines):
                path.write_text("".join(kept + "\n" for kept in lines[:-1]))  # appending must not continue the torn line
                break
            raise ConfigError(f"{path}: line {n} is not JSON ({e}); delete the file to replay the rollouts.") from e
        done[(row["id"], row["seed"])] = row
    return done


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
    options = env_options(args)
    envs = [gym.make(env_id, **options) for _ in range(args.num_envs)]
    examples = search_env(envs[0]).examples[: args.limit]
    budget = args.budget()
    tasks = [Task(ex.id, seed=rollout_seed(args.seed, r)) for ex in examples for r in range(budget)]
    done = read_rollouts(out, args)
    todo = [t for t in tasks if (t.example_id, t.seed) not in done]
    if todo and lm is None:  # an earlier run that played every rollout needs no model
        lm = load_lm(args.model, backend=args.backend)
    out.mkdir(parents=True, exist_ok=True)  # after the model loads: a missing backend leaves nothing behind
    with (out / ROLLOUTS_FILE).open("a") as sink:
        if sink.tell() == 0:
            sink.write(json.dumps({"settings": rollout_settings(args)}) + "\n")

        def keep(result: Any) -> None:
            row = {
                "id": result.example_id, "seed": result.seed, "prediction": result.prediction, **{m: getattr(result, m) for m in METRICS},
                "outcome": result.outcome, "num_turns": result.num_turns, "generated_tokens": result.generated_tokens,
            }
            done[(row["id"], row["seed"])] = row
            sink.write(json.dumps(row) + "\n")
            sink.flush()

        if todo:
            agent = policy_agent(envs[0], lm, max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=1.0, seed=args.seed)
            run_episodes(envs[: len(todo)], agent, todo, on_result=keep, progress=progress, desc="stage-sets rollouts")
    results = [done[(t.example_id, t.seed)] for t in tasks]

    counts = {d: 0 for d in DIFFICULTIES}
    scored: list[dict[str, Any]] = []
    categorized: list[tuple[str, Any]] = []
    for i, ex in enumerate(examples):
        mine = results[i * budget : (i + 1) * budget]
        correct = [r[args.metric] >= 1.0 for r in mine]
        needed = rollouts_needed(correct)
        category = difficulty(needed, easy_below=args.easy_below, difficult_above=args.difficult_above)
        counts[category] += 1
        scored.append({
            "id": ex.id, "question": ex.question, "rollouts_needed": needed, "difficulty": category, "correct": correct,
            "predictions": [r["prediction"] for r in mine],
        })
        tagged = dataclasses.replace(ex, metadata={**ex.metadata, "rollouts_needed": needed, "difficulty": category})
        categorized.append((category, tagged))
    sizes = {1: args.stage1_size, 2: args.stage2_size}
    by_stage = {stage: pick_stage(categorized, stage, sizes[stage], args.seed) for stage in STAGE_FILES}

    for stage, chosen in by_stage.items():
        write_qa(chosen, stage_file(out, stage))
    write_atomically(out / "difficulty.jsonl", "".join(json.dumps(row) + "\n" for row in scored))
    record = {**dataclasses.asdict(args), "rollouts": budget, "counts": counts, "stage_counts": {f"stage{k}": len(v) for k, v in by_stage.items()}}
    write_atomically(out / "config.json", json.dumps(record, indent=2))
    return {**counts, "stage1": len(by_stage[1]), "stage2": len(by_stage[2])}
