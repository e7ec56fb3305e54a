"""``searchgym train`` and ``searchgym sft``: one flag per dataclass field, its docstring as help."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from searchgym.training.args import PRESETS, Args, field_docs

TRAIN_EPILOG = """examples:
  searchgym sft --model scratch --epochs 20 --out runs/sft                 # tiny model learns the protocol
  searchgym train --model runs/sft/final --algorithm grpo --n 4 --lr 1e-4 --out runs/grpo
  searchgym train --preset search-r1-grpo --model smollm2 --lora-rank 8 --lr 1e-4 \\
      --env-options '{"corpus": "wiki-vital", "dataset": "wiki-vital-answerable"}' --total-steps 20
  searchgym train --preset r1-searcher --stage2-step 10 ...                 # two-stage reward curriculum

presets (the papers' optimisation settings; batch sizes stay yours): {presets}
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


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"max_turns\": 4}}', got {text!r} ({e.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"max_turns\": 4}}', got {text!r}")
    return value


def add_fields(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--flag`` per field of ``cls``; defaults are not set (only given flags override)."""
    docs = field_docs(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        help_text = f"{docs.get(f.name, '')} (default: {json.dumps(default) if isinstance(default, (dict, list)) else default})"
        kind = _kind(str(f.type))
        if kind == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        elif kind == "json":
            parser.add_argument(flag, type=_json_dict, default=argparse.SUPPRESS, metavar="JSON", help=help_text)
        elif kind == "list":
            parser.add_argument(flag, nargs="+", default=argparse.SUPPRESS, metavar="NAME", help=help_text)
        else:
            convert = {"int": int, "float": float, "str": str}[kind]
            if "None" in str(f.type):
                convert = _none_or(convert)
            parser.add_argument(flag, type=convert, default=argparse.SUPPRESS, metavar=kind.upper(), help=help_text)


def add_train_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "train",
        help="RL-train an LM agent against an env (PPO, GRPO, REINFORCE++)",
        description=(
            "Rollouts with the vectorized driver, token-level PPO / GRPO / REINFORCE++ updates with loss masks, "
            "metrics.csv + TensorBoard + curves.png, periodic greedy evaluation through the benchmark harness, "
            "atomic checkpoints and exact resume. Every field of searchgym.training.Args is a flag."
        ),
        epilog=TRAIN_EPILOG.replace("{presets}", ", ".join(PRESETS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None, help="start from a paper's settings; flags override them")
    add_fields(parser, Args)


def add_sft_parser(sub: Any) -> None:
    from searchgym.training.sft import SFTArgs

    parser = sub.add_parser(
        "sft",
        help="supervised warm start on the synthwiki oracle's trajectories",
        description=(
            "Records the synthwiki oracle playing the env's protocol as token trajectories (the student's chat "
            "template and tokenizer, observations masked out), trains the student on its turns and saves "
            "OUT/final, a folder `searchgym train --model` takes. --model scratch builds a new small model."
        ),
    )
    add_fields(parser, SFTArgs)


def _given(ns: argparse.Namespace, cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(ns).items() if k in names}


def train_main(ns: argparse.Namespace) -> int:
    from searchgym.training.args import preset
    from searchgym.training.trainer import Trainer

    given = _given(ns, Args)
    args = preset(ns.preset, **given) if ns.preset else Args(**given)
    rows = Trainer(args).train()
    if rows:
        last = rows[-1]
        print(f"step {last['step']}: reward {last['reward']:.3f}, EM {last['em']:.3f}; wrote {args.out}/metrics.csv, curves.png, final/")
    else:
        print(f"nothing to do: {args.out} already reached step {args.total_steps} (raise --total-steps to continue)")
    return 0


def sft_main(ns: argparse.Namespace) -> int:
    from searchgym.training.sft import SFTArgs, sft

    args = SFTArgs(**_given(ns, SFTArgs))
    rows = sft(args)
    last = rows[-1]
    print(f"{last['step']} steps, final loss {last['loss']:.3f}, eval reward {last.get('eval_reward', float('nan')):.3f}; wrote {args.out}/final")
    return 0

