"""Each paper's own training run: ``searchgym train --preset P --paper-scale``.

A preset (:data:`~searchgym.training.args.PRESETS`) holds a paper's optimisation settings
at a size this 2-core CPU can run: four questions a step, a hundred steps, no token limits.
:data:`PAPER_SCALE` holds the rest of each paper's training run: questions per step,
answers per question, optimizer steps per update, steps, and the token limits of a turn, an
observation and a context. Each value names its source: the paper where it states the
value (section quoted in :data:`PAPER_SCALE`'s ``source``), else the released training
script, named. ``--paper-scale`` puts them over the preset and prints each with its source
(:func:`sources`, to stderr); flags given on the command line still win, and ``--dry-run``
prints the resolved arguments without training.

Mini-batches count sequences, as the papers' verl and OpenRLHF trainers do: a step of
``questions_per_step * n`` episodes takes ``mini_batches`` optimizer steps of
``questions_per_step * n / mini_batches`` sequences each.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError, UnknownNameError


@dataclass(frozen=True)
class Setting:
    """One setting of a paper's run: its value, where the value comes from, and where the
    source is a paper, the words of that paper (``quote``, found in ``paper``'s text by
    ``tests/test_papers_page.py``)."""

    value: Any
    source: str
    quote: str = ""
    paper: str = ""


# Search-R1's paper has no hyper-parameter appendix: its schedule is a released script's.
# The repository holds two runs of the NQ + HotpotQA training (files at commit a14dc3a):
# scripts/nq_hotpotqa/v0.2/ (1,005 steps, warm-up 0.285 / 0.015), which its
# docs/experiment_log.md lists with the paper and whose numbers RECON App. B.4 reports for
# "the original Search-R1 implementation": ``--paper-scale``; and scripts/nq_hotpotqa/v0.1/
# (305 steps, warm-up 0.95 / 0.05), the scripts scripts/nq_hotpotqa/README.md runs under
# "Reproduce the paper results" (added there as train_ppo.sh and train_grpo.sh, moved
# unchanged to v0.1/ in commit 968c38c): ``--paper-scale v0.1``.
_SEARCH_R1_PPO = "Search-R1's released scripts/nq_hotpotqa/v0.2/train_ppo.sh"
_SEARCH_R1_GRPO = "Search-R1's released scripts/nq_hotpotqa/v0.2/train_grpo.sh"
_SEARCH_R1_PPO_V01 = "Search-R1's released scripts/nq_hotpotqa/v0.1/train_ppo.sh"
_SEARCH_R1_GRPO_V01 = "Search-R1's released scripts/nq_hotpotqa/v0.1/train_grpo.sh"


def _search_r1_limits(script: str, lines: tuple[int, int, int]) -> dict[str, Setting]:
    """The token limits of a Search-R1 script (the same in all four): ``lines`` are those of
    max_response_length, max_obs_length and max_prompt_length."""
    response, obs, prompt = lines
    return {
        "max_new_tokens": Setting(500, f"paper silent; {script}:{response}: data.max_response_length=500"),
        "max_observation_tokens": Setting(500, f"paper silent; {script}:{obs}: data.max_obs_length=500"),
        "max_context_tokens": Setting(4096, f"paper silent; {script}:{prompt}: data.max_prompt_length=4096"),
    }


#: Preset -> Args field -> :class:`Setting`: the paper's training run.
PAPER_SCALE: dict[str, dict[str, Setting]] = {
    "search-r1-ppo": {
        "questions_per_step": Setting(
            512, f"paper silent; {_SEARCH_R1_PPO}:31: data.train_batch_size=512 (RECON App. B.4: 'Global batch size 512')",
            quote="Global batch size 512", paper="RECON",
        ),
        "mini_batches": Setting(2, f"paper silent; {_SEARCH_R1_PPO}:44: ppo_mini_batch_size=256 of 512 sequences"),
        "total_steps": Setting(1005, f"paper silent; {_SEARCH_R1_PPO}:82: trainer.total_training_steps=1005"),
        **_search_r1_limits(_SEARCH_R1_PPO, (34, 36, 33)),
    },
    "search-r1-grpo": {
        "questions_per_step": Setting(512, f"paper silent; {_SEARCH_R1_GRPO}:31: data.train_batch_size=512"),
        "n": Setting(5, "Search-R1 §4.3: 'five sampled responses per prompt'", quote="five sampled responses per prompt", paper="Search-R1"),
        "mini_batches": Setting(10, f"paper silent; {_SEARCH_R1_GRPO}:45: ppo_mini_batch_size=256 of 512 x 5 sequences"),
        "total_steps": Setting(1005, f"paper silent; {_SEARCH_R1_GRPO}:73: trainer.total_training_steps=1005"),
        **_search_r1_limits(_SEARCH_R1_GRPO, (34, 36, 33)),
    },
    "recon": {
        "questions_per_step": Setting(512, "RECON App. B.4: 'Global batch size 512'", quote="Global batch size 512", paper="RECON"),
        "mini_batches": Setting(2, "RECON App. B.4: 'mini batch size 256'", quote="mini batch size 256", paper="RECON"),
        "total_steps": Setting(1005, "RECON App. B.4: 'for 1005 steps'", quote="for 1005 steps", paper="RECON"),
        "max_new_tokens": Setting(500, "RECON App. B.4: 'max response length=500 tokens'", quote="max response length=500 tokens", paper="RECON"),
        "max_context_tokens": Setting(4096, "RECON App. B.4: 'Max prompt length=4096 tokens'", quote="Max prompt length=4096 tokens", paper="RECON"),
        "max_observation_tokens": Setting(500, f"paper silent; {_SEARCH_R1_PPO}:36: data.max_obs_length=500"),
        "env_options": Setting(
            {"max_turns": 5}, "RECON App. C, Alg. 1: the 'maximum action budget' B counts every action, the answer too",
            quote="maximum action budget", paper="RECON",
        ),
    },
    "r1-searcher": {
        "questions_per_step": Setting(64, "R1-Searcher §3.3: 'a rollout batch size of 64'", quote="a rollout batch size of 64", paper="R1-Searcher"),
        "n": Setting(16, "R1-Searcher §3.3: 'Each data sample undergoes 16 rollouts'", quote="Each data sample undergoes 16 rollouts", paper="R1-Searcher"),
        "mini_batches": Setting(4, "R1-Searcher §3.3: 'a train batch size of 256' (sequences) of 64 x 16", quote="a train batch size of 256", paper="R1-Searcher"),
        "lr": Setting(2e-6, "R1-Searcher §3.3: 'The learning rate is 2e-6'", quote="The learning rate is 2e-6", paper="R1-Searcher"),
        "total_steps": Setting(
            6 + 128,
            "derived: searchgym reads §3.3's 'The training epoch is set to 1' as one pass over Table 1's sets at 64 "
            "questions a step: ceil(350 / 64) = 6 steps of stage 1 + ceil(8,148 / 64) = 128 of stage 2 = 134; the paper "
            "gives no step count, and R1-Searcher's released scripts/qwen_reinforce_plus_train.sh passes OpenRLHF "
            "--max_epochs 1 (:62; one pass over each rollout batch, which ppo_epochs=1 also is) and "
            "--num_episodes 10000 (:63, :22), no step count",
        ),
        "stage2_step": Setting(6, "derived: stage 2 after one pass over stage 1's 350 questions at 64 a step; paper silent (its scripts train each stage as its own run)"),
        "max_new_tokens": Setting(512, "paper silent; R1-Searcher's released evaluation/eval_search_loacl.py: max_tokens=512"),
        "max_context_tokens": Setting(
            1024 + 29000,
            "paper silent; R1-Searcher's released scripts/qwen_reinforce_plus_train.sh: --prompt_max_len 1024 (:66) + "
            "--generate_max_len 29000 (:67, :28; the Llama scripts the same)",
        ),
    },
    "s3": {
        "questions_per_step": Setting(120, "s3 App. A.2: 'a total batch size of 120'", quote="a total batch size of 120", paper="s3"),
        "mini_batches": Setting(4, "paper silent; s3's released scripts/train/train_s3.sh: ppo_mini_batch_size=30 of 120"),
        "total_steps": Setting(20, "s3 §4.1: 'we use the checkpoints at step 20'", quote="we use the checkpoints at step 20", paper="s3"),
        "temperature": Setting(0.6, "s3 App. A.2: 'a rollout temperature of 0.6'", quote="a rollout temperature of 0.6", paper="s3"),
        "max_new_tokens": Setting(500, "paper silent; s3's released train_s3.sh: data.max_response_length=500"),
        "max_observation_tokens": Setting(1400, "s3 App. A.2: 'a maximum of 1,400 tokens allocated to the top-k' retrieved documents per turn", quote="a maximum of 1,400 tokens allocated to the top-k", paper="s3"),
        "max_context_tokens": Setting(8000, "s3 App. A.2: 'The context window is set to 8,000 tokens'", quote="The context window is set to 8,000 tokens", paper="s3"),
    },
    "r-search": {
        "questions_per_step": Setting(256, "R-Search §4.3: 'a batch size of 256'", quote="a batch size of 256", paper="R-Search"),
        "n": Setting(5, "R-Search §4.3: 'we sample 5 responses for each input prompt'", quote="we sample 5 responses for each input prompt", paper="R-Search"),
        "mini_batches": Setting(5, "paper silent; R-Search's released scripts/train_grpo_7b.sh: ppo_mini_batch_size=256 of 256 x 5 sequences"),
        "total_steps": Setting(195, "R-Search §4.3: 'a maximum total of 195 training steps'", quote="a maximum total of 195 training steps", paper="R-Search"),
        "warmup_ratio": Setting(0.95, "R-Search §4.3: 'warm-up ratio to 1e-6 and 0.95'", quote="warm-up ratio to 1e-6 and 0.95", paper="R-Search"),
        "max_new_tokens": Setting(500, "paper silent; R-Search's released train_grpo_7b.sh: data.max_response_length=500"),
        "max_observation_tokens": Setting(1800, "paper silent; R-Search's released train_grpo_7b.sh: data.max_obs_length=1800"),
        "max_context_tokens": Setting(8192, "paper silent; R-Search's released train_grpo_7b.sh: data.max_prompt_length=8192"),
    },
    # StepSearch (searchgym/methods/stepsearch.py): its paper's text could not be read here, so the
    # schedule is its released train.sh at commit 43215ba (docs/methods.md).
    "stepsearch": {
        "questions_per_step": Setting(128, "paper silent; StepSearch's released train.sh: data.train_batch_size=128"),
        "mini_batches": Setting(4, "paper silent; StepSearch's released train.sh: ppo_mini_batch_size=32 of 128 sequences"),
        "total_steps": Setting(1120, "paper silent; StepSearch's released train.sh: 1120 steps (6 epochs)"),
        "max_new_tokens": Setting(800, "paper silent; StepSearch's released train.sh: data.max_response_length=800"),
        "max_observation_tokens": Setting(800, "paper silent; StepSearch's released train.sh: data.max_obs_length=800"),
    },
    # AutoRefine (searchgym/methods/autorefine.py): its paper's text could not be read here, so the
    # schedule is its released cmd/train.sh (docs/methods.md).
    "autorefine": {
        "questions_per_step": Setting(256, "paper silent; AutoRefine's released cmd/train.sh: data.train_batch_size=256"),
        "mini_batches": Setting(
            5, "paper silent; AutoRefine's released cmd/train.sh:41 (86acc0a): ppo_mini_batch_size=256 of 256 x 5 sequences "
            "(n_agent=5, :55; the trainer repeats the batch 5 times, verl/trainer/ppo/ray_trainer.py:830, and splits it "
            "into mini-batches of sequences, verl/workers/actor/dp_actor.py:220, at 8363788)",
        ),
        "total_steps": Setting(300, "paper silent; AutoRefine's released cmd/train.sh: trainer.total_training_steps=300"),
        "max_new_tokens": Setting(512, "paper silent; AutoRefine's released cmd/train.sh: data.max_response_length=512"),
        "max_observation_tokens": Setting(512, "paper silent; AutoRefine's released cmd/train.sh: data.max_obs_length=512"),
    },
    # ParallelSearch (searchgym/methods/parallelsearch.py): its paper's text could not be read here,
    # so the schedule is its released train_parallelsearch.sh (docs/methods.md).
    "parallelsearch": {
        "questions_per_step": Setting(512, "paper silent; ParallelSearch's released train_parallelsearch.sh: data.train_batch_size=512"),
        "mini_batches": Setting(2, "paper silent; ParallelSearch's released train_parallelsearch.sh: ppo_mini_batch_size=256 of 512 sequences"),
        "total_steps": Setting(1005, "paper silent; ParallelSearch's released train_parallelsearch.sh: trainer.total_training_steps=1005"),
        "max_new_tokens": Setting(500, "paper silent; ParallelSearch's released train_parallelsearch.sh: data.max_response_length=500"),
        "max_observation_tokens": Setting(1000, "paper silent; ParallelSearch's released train_parallelsearch.sh: data.max_obs_length=1000"),
        "max_context_tokens": Setting(5696, "paper silent; ParallelSearch's released train_parallelsearch.sh: data.max_prompt_length=5696"),
    },
    # ZeroSearch (searchgym/methods/zerosearch.py): its paper's text could not be read here, so the
    # schedule is its released train_grpo.sh and README at commit 2d4cdca (docs/methods.md).
    "zerosearch": {
        "questions_per_step": Setting(64, "paper silent; ZeroSearch's released train_grpo.sh: data.train_batch_size=64"),
        "mini_batches": Setting(
            2, "paper silent; ZeroSearch's released train_grpo.sh:40 (2d4cdca): ppo_mini_batch_size=256 of 64 x 5 = 320 "
            "sequences (n_agent=5, :54; the trainer repeats the batch 5 times, verl/trainer/ppo/ray_trainer.py:750, and "
            "splits it into mini-batches of 256 sequences, verl/workers/actor/dp_actor.py:220): two updates a step, of "
            "256 and 64 sequences there, of 160 each here",
        ),
        "total_steps": Setting(203, "paper silent; ZeroSearch's released README.md: TOTAL_STEPS 203 (also the curriculum's length)"),
        "max_new_tokens": Setting(500, "paper silent; ZeroSearch's released train_grpo.sh: data.max_response_length=500"),
        "max_observation_tokens": Setting(2048, "paper silent; ZeroSearch's released train_grpo.sh: data.max_obs_length=2048"),
        "max_context_tokens": Setting(4096, "paper silent; ZeroSearch's released train_grpo.sh: data.max_prompt_length=4096"),
    },
}


#: The name of :data:`PAPER_SCALE`'s run for a preset whose paper's code released more
#: than one (``--paper-scale`` alone, or ``--paper-scale NAME``).
DEFAULT_RUNS: dict[str, str] = {"search-r1-ppo": "v0.2", "search-r1-grpo": "v0.2"}

#: Preset -> run name -> Args field -> :class:`Setting`: the other released runs of a paper
#: (``--paper-scale NAME``), each whole, in place of :data:`PAPER_SCALE`'s. Search-R1's
#: v0.1 scripts differ from v0.2's in steps and warm-ups only (and leave top_p at verl's
#: 0.95, which searchgym's presets keep at 1.0 for exact PPO ratios).
PAPER_RUNS: dict[str, dict[str, dict[str, Setting]]] = {
    "search-r1-ppo": {
        "v0.1": {
            "questions_per_step": Setting(512, f"paper silent; {_SEARCH_R1_PPO_V01}:36: data.train_batch_size=512"),
            "mini_batches": Setting(2, f"paper silent; {_SEARCH_R1_PPO_V01}:49: ppo_mini_batch_size=256 of 512 sequences"),
            "total_steps": Setting(305, f"paper silent; {_SEARCH_R1_PPO_V01}:86: trainer.total_training_steps=305"),
            "warmup_ratio": Setting(0.95, f"paper silent; {_SEARCH_R1_PPO_V01}:48: actor lr_warmup_steps_ratio=0.95"),
            "value_warmup_ratio": Setting(0.05, f"paper silent; {_SEARCH_R1_PPO_V01}:65: critic lr_warmup_steps_ratio=0.05"),
            **_search_r1_limits(_SEARCH_R1_PPO_V01, (39, 41, 38)),
        },
    },
    "search-r1-grpo": {
        "v0.1": {
            "questions_per_step": Setting(512, f"paper silent; {_SEARCH_R1_GRPO_V01}:36: data.train_batch_size=512"),
            "n": Setting(5, "Search-R1 §4.3: 'five sampled responses per prompt'", quote="five sampled responses per prompt", paper="Search-R1"),
            "mini_batches": Setting(10, f"paper silent; {_SEARCH_R1_GRPO_V01}:50: ppo_mini_batch_size=256 of 512 x 5 sequences"),
            "total_steps": Setting(305, f"paper silent; {_SEARCH_R1_GRPO_V01}:78: trainer.total_training_steps=305"),
            "warmup_ratio": Setting(0.95, f"paper silent; {_SEARCH_R1_GRPO_V01}:48: actor lr_warmup_steps_ratio=0.95"),
            **_search_r1_limits(_SEARCH_R1_GRPO_V01, (39, 41, 38)),
        },
    },
}


def runs(name: str) -> tuple[str, ...]:
    """The run names ``--paper-scale NAME`` takes for preset ``name``, the default first (none
    for a preset with one run)."""
    if name not in DEFAULT_RUNS:
        return ()
    return (DEFAULT_RUNS[name], *PAPER_RUNS.get(name, {}))


def run_settings(name: str, run: str | None = None) -> dict[str, Setting]:
    """The settings of preset ``name``'s paper-scale run ``run`` (None: :data:`PAPER_SCALE`'s)."""
    if name not in PAPER_SCALE:
        raise UnknownNameError("paper-scale preset", name, PAPER_SCALE)
    if run is None or run == DEFAULT_RUNS.get(name):
        return PAPER_SCALE[name]
    if not runs(name):
        several = "; ".join(f"{p}: {', '.join(runs(p))}" for p in DEFAULT_RUNS)
        raise ConfigError(
            f"--paper-scale {run}: preset {name!r} has one paper-scale run; pass --paper-scale without a name "
            f"(the presets with several runs: {several})."
        )
    if run not in PAPER_RUNS[name]:
        raise UnknownNameError(f"paper-scale run of {name}", run, runs(name))
    return PAPER_RUNS[name][run]


def paper_scale(name: str, run: str | None = None) -> dict[str, Any]:
    """The Args values of preset ``name``'s paper-scale run (``run``: one of :func:`runs`;
    None: :data:`PAPER_SCALE`'s), a fresh copy."""
    return {field: _copy(s.value) for field, s in run_settings(name, run).items()}


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def paper_scale_args(name: str, run: str | None = None, **overrides: Any) -> Any:
    """:class:`~searchgym.training.args.Args` of preset ``name`` with its paper-scale run
    (``run``, as :func:`paper_scale`) over it, then ``overrides`` (``env_options`` merged key
    by key at each level)."""
    from searchgym.training.args import preset

    scale = paper_scale(name, run)
    for key in ("env_options", "eval_env_options"):
        if isinstance(scale.get(key), dict) and isinstance(overrides.get(key), dict):
            overrides = {**overrides, key: {**scale[key], **overrides[key]}}
    return preset(name, **{**scale, **overrides})


def check_paper_scale(args: Any) -> None:
    """A :class:`ConfigError` when the rollout batch does not split into ``mini_batches``
    equal mini-batches (a flag changed one side of the paper's split)."""
    batch = args.questions_per_step * args.n
    if batch % args.mini_batches:
        raise ConfigError(
            f"--paper-scale splits a step's {batch} episodes (questions_per_step * n) into {args.mini_batches} "
            f"mini-batches, which does not divide evenly; pass --mini-batches {math.gcd(batch, args.mini_batches)} "
            "or a questions_per_step that keeps the paper's mini-batch size."
        )


def sources(name: str, args: Any, run: str | None = None) -> list[str]:
    """One line per setting of preset ``name``'s paper-scale run (``run``, as
    :func:`paper_scale`): the flag, the value ``args`` holds and the source of the paper's
    value, or that a flag replaced it."""
    lines = []
    for field, setting in run_settings(name, run).items():
        value = getattr(args, field)
        flag = "--" + field.replace("_", "-")
        kept = {k: value.get(k) for k in setting.value} if isinstance(setting.value, dict) and isinstance(value, dict) else value
        if kept == setting.value:  # an env_options flag may add keys beside the paper's
            lines.append(f"{flag} {_show(value)}: {setting.source}")
        else:
            lines.append(f"{flag} {_show(value)}: set on the command line (the paper's run: {_show(setting.value)}, {setting.source})")
    return lines


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def flag_json(args: Any) -> dict[str, Any]:
    """``args`` as one JSON-able object keyed by the flags' names (``--questions-per-step``)."""
    return {"--" + f.name.replace("_", "-"): getattr(args, f.name) for f in dataclasses.fields(args)}
