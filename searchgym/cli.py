"""The ``searchgym`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="searchgym",
        description="Gymnasium environments for search-augmented question answering.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="play the synthwiki oracle through every protocol and measure retrieval on wiki-vital",
        description=(
            "Plays the scripted oracle through every registered env on synthwiki (reward, searches and "
            "context size per protocol), then measures how often BM25 and dense retrieval return the "
            "FanOutQA source article in the top 1 and top 5 on wiki-vital. Writes JSON and a PNG chart."
        ),
    )
    demo.add_argument("--num-passages", type=_positive, default=2000, help="size of the synthwiki world (default 2000)")
    demo.add_argument("--limit", type=_positive, default=None, help="at most this many dev questions per env (default all)")
    demo.add_argument(
        "--retrievers", nargs="+", default=["bm25", "dense"],
        help="retrievers to measure on wiki-vital (default: bm25 dense; also rank-bm25, dense-hnsw)",
    )
    demo.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder (default results/demo)")

    sub.add_parser("envs", help="list the registered environment ids and their defaults")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from searchgym.demo import run

        run(args.num_passages, args.limit, args.retrievers, args.out)
    elif args.command == "envs":
        from searchgym.envs.registration import ENV_SPECS

        for env_id, kwargs in sorted(ENV_SPECS.items()):
            print(env_id, " ".join(f"{k}={v}" for k, v in kwargs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
