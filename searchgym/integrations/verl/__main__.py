"""``python -m searchgym.integrations.verl``: write verl's parquet files, read Search-R1's.

    prepare          an env's train and test questions as verl parquet rows (--tools: for the tool agent loop)
    from-search-r1   Search-R1 processed parquet -> searchgym QA jsonl (an env's dataset=)
    config-dir       the folder of search_r1.yaml, the agent-loop and tool files (verl's --config-path)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from searchgym.error import ConfigError, SearchGymError
from searchgym.training.cli import json_object


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m searchgym.integrations.verl",
        description="Data for training searchgym envs with verl (docs/verl.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    prepare = sub.add_parser(
        "prepare",
        help="write OUT/train.parquet and OUT/test.parquet from a registered env's dataset",
        description=(
            "Writes one verl row per question of the env's dataset (data_source, prompt as chat messages, ability, "
            "reward_model.ground_truth.target, extra_info with index, example_id, question, split, env_id; "
            "agent_name 'searchgym'), for verl's data.train_files / data.val_files."
        ),
    )
    prepare.add_argument("--env", default="searchgym/SearchR1-v0", help="registered env id (default searchgym/SearchR1-v0)")
    prepare.add_argument("--out", type=Path, required=True, help="output folder")
    prepare.add_argument("--train-split", default="train", help="dataset split written to train.parquet (default train)")
    prepare.add_argument("--test-split", default="dev", help="dataset split written to test.parquet (default dev)")
    prepare.add_argument("--limit", type=_positive, default=None, help="first N questions of each split (default: all)")
    prepare.add_argument(
        "--env-kwargs", type=json_object, default={},
        help='gym.make arguments as JSON, e.g. \'{"corpus_options": {"seed": 1}}\' (default {})',
    )
    prepare.add_argument(
        "--tools", action="store_true",
        help="rows for verl's tool agent loop: the game's tool-calling prompt, agent_name 'searchgym_tool_agent', "
        "extra_info.tools_kwargs (docs/verl.md)",
    )

    convert = sub.add_parser(
        "from-search-r1",
        help="read Search-R1's processed parquet (nq, hotpotqa, ...) into a searchgym QA jsonl",
        description=(
            "Reads a parquet written by Search-R1's scripts/data_process (data_source, prompt, reward_model.ground_truth.target, "
            "extra_info.split/index) and writes its questions as FlashRAG JSON lines, which any env takes as dataset=PATH."
        ),
    )
    convert.add_argument("parquet", type=Path, help="Search-R1 parquet file (e.g. nq_search/train.parquet)")
    convert.add_argument("--out", type=Path, required=True, help="output .jsonl (or .jsonl.gz) file")

    sub.add_parser(
        "config-dir",
        help="print the folder of search_r1.yaml, agent_loop*.yaml and tools_*.yaml (for verl's --config-path)",
        description="Prints the folder that holds the Search-R1 recipe (search_r1.yaml), the agent-loop config files and the tool config files.",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "config-dir":
            print(Path(__file__).resolve().parent)
        elif args.command == "prepare":
            from searchgym.integrations.verl.data import verl_rows, write_parquet

            if args.train_split == args.test_split:
                raise ConfigError(f"prepare expects different train and test splits, got {args.train_split!r} for both.")
            for name, split in (("train", args.train_split), ("test", args.test_split)):
                rows = list(verl_rows(args.env, split=split, limit=args.limit, tools=args.tools, **args.env_kwargs))
                path = write_parquet(rows, args.out / f"{name}.parquet")
                print(f"{path}: {len(rows)} rows ({args.env}, split {split})")
        elif args.command == "from-search-r1":
            from searchgym.corpora.datasets import write_qa
            from searchgym.integrations.verl.data import read_examples

            examples = read_examples(args.parquet)
            path = write_qa(examples, args.out)
            print(f"{path}: {len(examples)} questions from {args.parquet}")
    except SearchGymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
