"""``searchgym train`` and ``searchgym sft``: one flag per dataclass field, its docstring as help."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from typing import Any

from searchgym.training.args import PRESETS, Args, field_docs

#: The Stable-Baselines3 trainer of ``--algorithm sb3-ppo|sb3-dqn`` lives at the package's
#: edge and is reached by name (as Gymnasium reaches an env class by its entry point), so
#: this layer imports nothing above it.
SB3_TRAIN = "searchgym.sb3.train"


def sb3_trainer() -> Any:
    """The module of :data:`SB3_TRAIN` (``SB3Args``, ``train_sb3``)."""
    return importlib.import_module(SB3_TRAIN)

TRAIN_EPILOG = """examples:
  searchgym sft --model scratch --epochs 20 --out runs/sft                 # tiny model learns the protocol
  searchgym train --model runs/sft/final --algorithm grpo --n 4 --lr 1e-4 --out runs/grpo
  searchgym train --preset search-r1-grpo --model smollm2 --lora-rank 8 --lr 1e-4 \\
      --env-options '{"corpus": "wiki-vital", "dataset": "wiki-vital-answerable"}' --total-steps 20
  searchgym train --preset r1-searcher --stage2-step 10 ...                 # two-stage reward curriculum
  searchgym train --preset r1-searcher --stage-sets runs/stage-sets ...     # each stage on its difficulty-picked questions
  searchgym train --algo sb3-ppo --total-timesteps 60000 --out runs/sb3      # classic RL over template actions
  searchgym train --preset s3 --paper-scale --dry-run                       # the paper's run, printed as flags
  searchgym train --preset search-r1-ppo --paper-scale v0.1 --dry-run       # another released run of the paper

presets (the papers' optimisation settings at CPU size): {presets}
--paper-scale adds the paper's own batch, steps and token limits (searchgym.training.paper_scale);
--paper-scale RUN picks another released run where a paper has several (Search-R1: v0.2, the default, or v0.1).
A run folder resumes from its newest complete checkpoint when the command is run again."""


def _kind(annotation: str) -> str:
    a = annotation.replace(" ", "")
    if a.startswith("dict"):
        return "json"
    if a.startswith("list"):
        return "list"
    if a == "bool":
        return "bool"
    for base in ("int", "float", "str"):
        if a in (base, f"{base}|None"):
            return base
    raise TypeError(f"no command-line form for {annotation!r}")


def _none_or(convert):
    def parse(text: str) -> Any:
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = convert.__name__
    return parse


def json_object(text: str) -> dict[str, Any]:
    """argparse type of a JSON-object option (gym.make options, configs)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"max_turns\": 4}}', got {text!r} ({e.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"max_turns\": 4}}', got {text!r}")
    return value


#: Short aliases of some flags.
ALIASES = {"algorithm": ("--algo",), "imports": ("--import",), "wrappers": ("--wrapper",), "hooks": ("--hook",)}
#: List fields whose flag may be given again to add more (``--import a --import b``).
REPEATABLE = ("imports", "wrappers", "hooks")


def add_fields(parser: Any, cls: type, *, skip: Any = ()) -> None:
    """One ``--flag`` per field of ``cls`` (except ``skip``); defaults are not set (only
    given flags override)."""
    docs = field_docs(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flags = ["--" + f.name.replace("_", "-"), *ALIASES.get(f.name, ())]
        default = getattr(defaults, f.name)
        help_text = f"{docs.get(f.name, '')} (default: {json.dumps(default) if isinstance(default, (dict, list)) else default})"
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        kind = _kind(str(f.type))
        if kind == "bool":
            parser.add_argument(flags[0], action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        elif kind == "json":
            parser.add_argument(*flags, type=json_object, default=argparse.SUPPRESS, metavar="JSON", help=help_text)
        elif kind == "list":
            item = int if "int" in str(f.type) else str
            action = "extend" if f.name in REPEATABLE else "store"
            parser.add_argument(*flags, nargs="+", action=action, type=item, default=argparse.SUPPRESS,
                                metavar=item.__name__.upper() if item is int else "NAME", help=help_text)
        else:
            convert = {"int": int, "float": float, "str": str}[kind]
            if "None" in str(f.type):
                convert = _none_or(convert)
            parser.add_argument(*flags, type=convert, default=argparse.SUPPRESS, metavar=kind.upper(), help=help_text)


def key_values(items: list[str], flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` items as a dict (true/false, ints and floats read as such), as bench reads them."""
    from searchgym.error import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} expects KEY=VALUE, got {item!r}.")
        if value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"
            continue
        for convert in (int, float):
            try:
                out[key] = convert(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


#: The env pieces train and sft name by flags of their own, as bench does: (env option, flag, dest).
PIECE_FLAGS = (("retriever", "--retriever", "piece_retriever"), ("retriever_options", "--retriever-option", "piece_retriever_option"),
               ("protocol", "--protocol", "piece_protocol"), ("record", "--record", "piece_record"),
               ("replay", "--replay", "piece_replay"), ("replay_misses", "--replay-misses", "piece_replay_misses"),
               ("context", "--context", "piece_context"), ("context_options", "--context-option", "piece_context_option"))


def add_piece_flags(parser: Any) -> None:
    """``--retriever NAME``, ``--retriever-option KEY=VALUE`` and ``--protocol NAME|MODULE:ATTR``:
    the env options of those names, with the meaning bench gives the same flags."""
    parser.add_argument(
        "--retriever", dest="piece_retriever", default=None, metavar="NAME|DIR|URL",
        help="retriever of every env (the env option 'retriever'): bm25, rank-bm25, dense, dense-hnsw, an index folder, the "
        "URL of a `searchgym serve`, a name given to register_retriever, or MODULE:ATTR naming your own engine",
    )
    parser.add_argument("--retriever-option", dest="piece_retriever_option", action="append", default=[], metavar="KEY=VALUE",
                        help="retriever option of every env (repeatable; the env option 'retriever_options')")
    parser.add_argument("--protocol", dest="piece_protocol", default=None, metavar="NAME|MODULE:ATTR",
                        help="protocol of every env, overriding the env's own (the env option 'protocol'): a name of "
                        "searchgym.envs.protocols.PROTOCOLS or MODULE:ATTR naming your own")
    add_record_flags(parser)
    add_context_flags(parser)


def add_context_flags(parser: Any, dest: str = "piece_") -> None:
    """``--context NAME`` and ``--context-option KEY=VALUE``: every env's context policy and its
    settings (the env options ``context`` and ``context_options``; docs/long-horizons.md)."""
    parser.add_argument("--context", dest=f"{dest}context", default=None, choices=("keep", "archive", "summarize"),
                        help="what every env's conversation becomes as it grows: keep (default), archive old tool results, "
                        "or summarize and restart (ReSum)")
    parser.add_argument("--context-option", dest=f"{dest}context_option", action="append", default=[], metavar="KEY=VALUE",
                        help="setting of the context policy (repeatable), e.g. keep_last=2, max_tokens=4096, by=policy")


def add_record_flags(parser: Any, dest: str = "piece_") -> None:
    """``--record DIR``, ``--replay DIR`` and ``--replay-misses``: every env's tool results kept
    in a folder, or answered from one (the env options of those names; docs/long-horizons.md)."""
    parser.add_argument("--record", dest=f"{dest}record", default=None, metavar="DIR",
                        help="keep every tool result (searches, summaries, open/find) in DIR, keyed by tool, arguments and the "
                        "corpus and index; a rerun with --replay DIR gets them back byte for byte")
    parser.add_argument("--replay", dest=f"{dest}replay", default=None, metavar="DIR",
                        help="answer every tool call from a folder --record wrote; a call it lacks is refused by name")
    parser.add_argument("--replay-misses", dest=f"{dest}replay_misses", choices=("refuse", "pass"), default=None,
                        help="with --replay: refuse a call the record lacks (default), or pass it to the live tool")


def piece_options(ns: argparse.Namespace, command: str) -> dict[str, Any]:
    """The env options :func:`add_piece_flags`' flags set (empty when none was given)."""
    out: dict[str, Any] = {}
    for key, flag, dest in PIECE_FLAGS:
        value = getattr(ns, dest, None)
        if key in ("retriever_options", "context_options"):
            value = key_values(value, flag) if value else None
        if value is not None:
            out[key] = value
    return out


def merge_piece_options(ns: argparse.Namespace, given: dict[str, Any], command: str) -> dict[str, Any]:
    """``given`` with :func:`piece_options` added to its ``env_options``; a key that --env-options
    sets too is refused (which one should win is a guess)."""
    from searchgym.error import ConfigError

    pieces = piece_options(ns, command)
    if not pieces:
        return given
    env_options = dict(given.get("env_options") or {})
    for key, flag, _ in PIECE_FLAGS:
        if key in pieces and key in env_options:
            raise ConfigError(f"searchgym {command} got the env option {key!r} from both --env-options and {flag}; give it once.")
    return {**given, "env_options": {**env_options, **pieces}}


def add_train_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "train",
        allow_abbrev=False,  # a flag is spelled out: --retriever is never read as --retriever-per-env
        help="RL-train an LM agent against an env (PPO, GRPO, REINFORCE++)",
        description=(
            "Rollouts with the vectorized driver, token-level PPO / GRPO / REINFORCE++ updates with loss masks, "
            "metrics.csv + TensorBoard + curves.png, periodic greedy evaluation through the benchmark harness, "
            "atomic checkpoints and exact resume. Every field of searchgym.training.Args is a flag. "
            "--algorithm sb3-ppo / sb3-dqn trains a Stable-Baselines3 MLP policy over template actions instead "
            "(searchgym.sb3.TemplateActions; the flags of searchgym.sb3.SB3Args)."
        ),
        epilog=TRAIN_EPILOG.replace("{presets}", ", ".join(PRESETS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None, help="start from a paper's settings; flags override them")
    from searchgym.training.paper_scale import DEFAULT_RUNS, runs

    several = "; ".join(f"{name}: {' or '.join(runs(name))} (default {run})" for name, run in DEFAULT_RUNS.items())
    parser.add_argument(
        "--paper-scale", nargs="?", const=True, default=False, metavar="RUN",
        help="with --preset: the paper's own training run over the CPU-sized preset (questions per step, mini-batches, "
        "steps, token limits; each value's source printed to stderr, from searchgym.training.paper_scale); flags still "
        f"override. RUN picks one of the runs a paper's code released where it has several ({several}: Search-R1's "
        "scripts/nq_hotpotqa/v0.2 with 1005 steps and warm-ups 0.285/0.015, or v0.1, the scripts its "
        "'Reproduce the paper results' runs, with 305 steps and 0.95/0.05)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the resolved arguments as one JSON object keyed by the flags' names, and exit")
    add_piece_flags(parser)
    add_fields(parser, Args)
    SB3Args = sb3_trainer().SB3Args  # noqa: N806 (a class)

    shared = [f for f in dataclasses.fields(SB3Args) if f.name in {g.name for g in dataclasses.fields(Args)} and f.name != "algorithm"]
    defaults = SB3Args()
    group = parser.add_argument_group(
        "Stable-Baselines3 (--algorithm sb3-ppo or sb3-dqn)",
        "These flags and the shared ones above configure searchgym.sb3.SB3Args; the shared ones take these "
        "defaults with an sb3 algorithm: "
        + ", ".join(f"--{f.name.replace('_', '-')} {json.dumps(getattr(defaults, f.name))}" for f in shared)
        + " (eval-every counts timesteps).",
    )
    add_fields(group, SB3Args, skip={f.name for f in dataclasses.fields(Args)})


def add_sft_parser(sub: Any) -> None:
    from searchgym.training.sft import SFTArgs

    parser = sub.add_parser(
        "sft",
        allow_abbrev=False,  # a flag is spelled out, as in train
        help="supervised warm start on the synthwiki oracle's trajectories",
        description=(
            "Records the synthwiki oracle playing the env's protocol as token trajectories (the student's chat "
            "template and tokenizer, observations masked out), trains the student on its turns and saves "
            "OUT/final, a folder `searchgym train --model` takes. --model scratch builds a new small model."
        ),
    )
    add_piece_flags(parser)
    add_fields(parser, SFTArgs)


def add_distill_parser(sub: Any) -> None:
    from searchgym.training.distill import DistillArgs

    parser = sub.add_parser(
        "distill-summarizer",
        help="train a RECON summarizer: relevance pretraining, then distillation of a teacher's summaries",
        description=(
            "RECON's two supervised stages over the env's questions and retriever: relevance pretraining (a linear "
            "head picks the candidate holding a gold answer; the head is then dropped), then the student learns the "
            "summaries a teacher model writes with RECON's prompt for each aspect, of the documents of every query a "
            "searcher policy issues (--searcher). Defaults: RECON's App. B.2-B.4 (LoRA r 8 / alpha 32, lr 1e-4, 16 a "
            "step, 5% warm-up). Saves OUT/final, a folder the env takes as summarizer_options={\"model\": \"OUT/final\"} "
            "with summarizer=\"llm\"."
        ),
    )
    add_fields(parser, DistillArgs)


STAGE_SETS_EPILOG = """examples:
  searchgym stage-sets --model M --backend vllm --dataset synthwiki --limit 200 --out runs/stage-sets   # the paper's rule: 21 rollouts, <10 / 10-20 / >20
  searchgym stage-sets --model tiny-random --limit 4 --rollouts 3 --easy-below 2 --difficult-above 2 --out /tmp/sets   # quick form
  searchgym stage-sets --model M --backend vllm --stage1-size 350 --stage2-size 8148 --seed 0 --out runs/stage-sets   # Table 1's counts, sampled
  searchgym train --preset r1-searcher --stage-sets runs/stage-sets --stage2-step 50 ...            # stage 1 on medium, stage 2 on medium + difficult

time on this 2-core CPU (shared): the quick form ~25 s; SmolLM2-135M at the defaults (up to 9 turns of 512
tokens a rollout) had not finished 6 rollouts after 36 minutes: score many questions with --backend vllm on a GPU
or --backend openai against a served model."""


def add_stage_sets_parser(sub: Any) -> None:
    from searchgym.training.stage_sets import StageSetArgs

    parser = sub.add_parser(
        "stage-sets",
        help="R1-Searcher's stage-1 / stage-2 training sets, picked by how many rollouts a model needs",
        description=(
            "Plays rollouts of every question with a model, counts the rollouts it takes to answer each correctly, and "
            "writes R1-Searcher's stage sets (Table 1): stage1.jsonl (medium questions), stage2.jsonl (medium and "
            "difficult), with difficulty.jsonl and config.json. `searchgym train --stage-sets OUT` trains on them."
        ),
        epilog=STAGE_SETS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fields(parser, StageSetArgs)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def stage_sets_main(ns: argparse.Namespace) -> int:
    from searchgym.training.stage_sets import StageSetArgs, stage_sets

    args = StageSetArgs(**_given(ns, StageSetArgs))
    counts = stage_sets(args, progress=not ns.quiet)
    print(
        f"{counts['easy']} easy, {counts['medium']} medium, {counts['difficult']} difficult questions "
        f"({args.budget()} rollouts each); wrote {args.out}/stage1.jsonl ({counts['stage1']} questions), "
        f"stage2.jsonl ({counts['stage2']}), difficulty.jsonl, config.json"
    )
    return 0


def _given(ns: argparse.Namespace, cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(ns).items() if k in names}


def _refuse(names: list[str], what: str, fix: str) -> Exception:
    from searchgym.error import ConfigError

    flags = ", ".join("--" + k.replace("_", "-") for k in names)
    verb, pronoun = ("configure", "them") if len(names) > 1 else ("configures", "it")
    return ConfigError(f"{flags} {verb} {what}; drop {pronoun}{fix}.")


def sb3_main(ns: argparse.Namespace) -> int:
    trainer = sb3_trainer()
    given = _given(ns, trainer.SB3Args)
    foreign = sorted(set(_given(ns, Args)) - set(given)) + [n for n in ("preset", "paper_scale", "dry_run") if getattr(ns, n, None)]
    foreign += [flag.removeprefix("--").replace("-", "_") for _, flag, dest in PIECE_FLAGS if getattr(ns, dest, None)]
    if foreign:
        raise _refuse(foreign, f"language-model training, not --algorithm {ns.algorithm}", "")
    args = trainer.SB3Args(**given)
    rows = trainer.train_sb3(args)
    last = rows[-1]
    print(
        f"timestep {last['step']}: eval reward {last['eval_reward']:.3f}, answered right {last['eval_success']:.3f} "
        f"({args.eval_split}); wrote {args.out}/model.zip, policy.json, metrics.csv, curves.png"
    )
    return 0


def train_main(ns: argparse.Namespace) -> int:
    from searchgym.training.args import preset
    from searchgym.training.args import SB3_ALGORITHMS
    from searchgym.training.trainer import Trainer

    if getattr(ns, "algorithm", None) in SB3_ALGORITHMS:
        return sb3_main(ns)
    only_sb3 = sorted(set(_given(ns, sb3_trainer().SB3Args)) - set(_given(ns, Args)))
    if only_sb3:
        raise _refuse(only_sb3, "--algorithm sb3-ppo / sb3-dqn runs", " or pick one of those algorithms")
    given = merge_piece_options(ns, _given(ns, Args), "train")
    if ns.paper_scale:
        from searchgym.error import ConfigError
        from searchgym.training.paper_scale import check_paper_scale, paper_scale_args, sources

        if not ns.preset:
            raise ConfigError(f"--paper-scale runs a paper's training run; name the paper with --preset (one of {', '.join(sorted(PRESETS))}).")
        run = None if ns.paper_scale is True else ns.paper_scale
        args = paper_scale_args(ns.preset, run, **given)
        check_paper_scale(args)
        lines = sources(ns.preset, args, run)
        title = f"--paper-scale: {ns.preset}'s training run" if run is None else f"--paper-scale {run}: {ns.preset}'s training run {run}"
        print(f"{title} over its preset, each value's source:", *lines, sep="\n  ", file=sys.stderr)
    else:
        args = preset(ns.preset, **given) if ns.preset else Args(**given)
    from searchgym.training.args import check_args, disabled_options

    check_args(args)
    for note in disabled_options(args, given):
        print(f"warning: {note}", file=sys.stderr, flush=True)
    if ns.dry_run:
        from searchgym.training.paper_scale import flag_json

        print(json.dumps(flag_json(args), indent=2))
        return 0
    rows = Trainer(args, warn_disabled=False).train()
    if rows:
        last = rows[-1]
        print(f"step {last['step']}: reward {last['reward']:.3f}, EM {last['em']:.3f}; wrote {args.out}/metrics.csv, curves.png, final/")
        print(f"read its curves and rollouts: searchgym view {args.out}")
    else:
        print(f"nothing to do: {args.out} already reached step {args.total_steps} (raise --total-steps to continue)")
    return 0


def sft_main(ns: argparse.Namespace) -> int:
    from searchgym.training.sft import SFTArgs, sft

    args = SFTArgs(**merge_piece_options(ns, _given(ns, SFTArgs), "sft"))
    rows = sft(args)
    last = rows[-1]
    evaluated = f"eval reward {last['eval_reward']:.3f}" if "eval_reward" in last else "no evaluation (--eval-limit 0)"
    print(f"{last['step']} steps, final loss {last['loss']:.3f}, {evaluated}; wrote {args.out}/final")
    return 0



def distill_main(ns: argparse.Namespace) -> int:
    from searchgym.training.distill import DistillArgs, distill_summarizer

    args = DistillArgs(**_given(ns, DistillArgs))
    result = distill_summarizer(args)
    last = result["rows"][-1]
    print(
        f"{result['summaries']} teacher summaries of {result['questions']} questions ({result['too_long']} too long for the "
        f"student), {result['relevance_groups']} relevance groups; final loss {last['loss']:.3f}; wrote {args.out}/final"
    )
    return 0
