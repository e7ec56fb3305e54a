"""searchgym questions as the parquet rows verl trains on, and back.

verl's ``RLHFDataset`` reads one row per prompt. :func:`verl_rows` writes them from any
registered env's dataset and split; :func:`example_from_row` reads a row back into the
:class:`QAExample` the env is reset to. It reads searchgym's rows and Search-R1's
processed parquet (``scripts/data_process/nq_search.py`` and its siblings), so data made
for Search-R1 trains here unchanged.

A row, as :func:`verl_rows` writes it::

    data_source   "searchgym/SearchR1-v0"        (verl groups validation metrics by it)
    prompt        [{"role": "user", "content": ...}]  the env's prompt as chat messages
    ability       "search-qa"
    reward_model  {"style": "searchgym", "ground_truth": {"target": [answers...]}}
    extra_info    {"index", "example_id", "question", "split", "env_id", "metadata_json"}
    agent_name    "searchgym"                    (the agent loop verl runs for the row)

A tool row (``verl_rows(..., tools=True)``, for verl's tool agent loop) has the game's
tool-calling prompt, ``agent_name`` ``"searchgym_tool_agent"`` and
``extra_info.tools_kwargs`` ``{<tool>: {"create_kwargs": {"example_id", "question",
"answers", "metadata_json"}}}`` for each tool of the game.

Search-R1's rows have ``data_source`` (``nq``, ``hotpotqa``, ...), ``prompt`` (its
instructions ending in ``Question: ...``), ``ability``, ``reward_model`` with
``ground_truth.target`` (the golden answers) and ``extra_info`` with ``split`` and
``index``; FlashRAG's ``id``, ``question`` and ``golden_answers`` columns are kept
when present. The env writes its own prompt at reset; a row's ``prompt`` is what verl
measures and filters by length.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from searchgym.corpora.types import QAExample
from searchgym.envs.access import search_env
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError, require

#: The name the agent loop is registered under in verl (``agent_name`` of every row).
AGENT_NAME = "searchgym"
#: The name of verl's tool agent loop with searchgym's episode (``agent_name`` of tool rows).
TOOL_AGENT_NAME = "searchgym_tool_agent"
ABILITY = "search-qa"
REWARD_STYLE = "searchgym"
#: Columns verl's dataset needs in every row.
REQUIRED_COLUMNS = ("data_source", "prompt", "reward_model")


def verl_row(
    example: QAExample, prompt_messages: Sequence[Mapping[str, str]], *, index: int, split: str, env_id: str,
    tools: Sequence[str] = (),
) -> dict[str, Any]:
    """The parquet row of one question (see the module docstring). With ``tools`` (the
    game's tool names) it is a tool row: ``agent_name`` is ``searchgym_tool_agent`` and
    ``extra_info.tools_kwargs.<tool>.create_kwargs`` names the question for each tool."""
    row = {
        "data_source": env_id,
        "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt_messages],
        "ability": ABILITY,
        "reward_model": {"style": REWARD_STYLE, "ground_truth": {"target": list(example.answers)}},
        "extra_info": {
            "index": int(index),
            "example_id": example.id,
            "question": example.question,
            "split": split,
            "env_id": env_id,
            "metadata_json": json.dumps(dict(example.metadata), sort_keys=True, default=str),
        },
        "agent_name": AGENT_NAME,
    }
    if tools:
        question = {
            "example_id": example.id, "question": example.question, "answers": list(example.answers),
            "metadata_json": row["extra_info"]["metadata_json"],
        }
        row["extra_info"]["tools_kwargs"] = {name: {"create_kwargs": dict(question)} for name in tools}
        row["agent_name"] = TOOL_AGENT_NAME
    return row


def verl_rows(
    env_id: str, *, split: str = "train", limit: int | None = None, tools: bool = False, **env_kwargs: Any
) -> Iterator[dict[str, Any]]:
    """One row per question of ``env_id``'s dataset ``split`` (``gym.make`` arguments in
    ``env_kwargs``, e.g. ``corpus_options``), in dataset order.

    Each prompt is the one the env writes at reset (for s3 with its first documents).
    ``tools=True`` writes rows for verl's tool agent loop
    (:mod:`searchgym.integrations.verl.tools`): the game's tool-calling prompt
    (``action_format="tools"``), ``agent_name`` ``searchgym_tool_agent`` and each tool's
    ``create_kwargs``.
    """
    import gymnasium as gym

    from searchgym.envs.registration import full_env_id

    env_id = full_env_id(env_id)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"verl_rows expects limit to be a positive integer or None, got {limit!r}.")
    if tools:
        env_kwargs = {**env_kwargs, "action_format": "tools"}
    env = gym.make(env_id, split=split, **env_kwargs)
    try:
        names = [t["function"]["name"] for t in search_env(env).game.tools.tools] if tools else []
        examples = list(search_env(env).examples)
        if not examples:
            raise ConfigError(f"verl_rows expects {env_id} to have questions in split {split!r}, got none. Pick another split.")
        for index, example in enumerate(examples[:limit]):
            _, info = env.reset(seed=index, options={"example": example})
            yield verl_row(example, info["prompt_messages"], index=index, split=split, env_id=env_id, tools=names)
    finally:
        env.close()


def write_parquet(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """Write ``rows`` to the parquet file ``path`` (folders are created); returns the path."""
    pa = require("pyarrow", extra="verl", feature="Writing verl parquet files")
    import pyarrow.parquet as pq

    rows = [dict(r) for r in rows]
    if not rows:
        raise ConfigError(f"write_parquet expects at least one row, got none for {path}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)
    return path


def read_parquet(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a parquet file as dicts (nested columns as lists and dicts)."""
    # Reading (e.g. from-search-r1 converting Search-R1's parquet) needs pyarrow only, not verl itself.
    require("pyarrow", extra="verl", feature="Reading parquet files", install="pip install 'pyarrow>=19'")
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(2, f"No parquet file at {path}; run `python -m searchgym.integrations.verl prepare` to write one", str(path))
    rows = pq.read_table(path).to_pylist()
    if rows:
        missing = [c for c in REQUIRED_COLUMNS if c not in rows[0]]
        if missing:
            raise DataFormatError(
                path, None, f"verl rows with the columns {', '.join(REQUIRED_COLUMNS)}",
                f"a file without {', '.join(missing)} (columns: {', '.join(rows[0])}). Write it with "
                "searchgym.integrations.verl.data.verl_rows or Search-R1's scripts/data_process",
            )
    return rows


def read_examples(path: str | os.PathLike) -> list[QAExample]:
    """The questions of a verl parquet file (searchgym's or Search-R1's)."""
    return [example_from_row(row, where=path, line=i) for i, row in enumerate(read_parquet(path))]


def example_from_row(row: Mapping[str, Any], *, where: object = "verl row", line: int | None = None) -> QAExample:
    """The :class:`QAExample` of one row (searchgym's or Search-R1's layout).

    id: ``extra_info.example_id``, else the ``id`` column, else ``<data_source>-<split>-<index>``.
    question: ``extra_info.question``, else the ``question`` column, else the text after the
    last ``Question:`` of the prompt's last user message (Search-R1's template).
    answers: ``reward_model.ground_truth.target`` (or a bare ``ground_truth``), else ``golden_answers``.
    """
    if not isinstance(row, Mapping):
        raise DataFormatError(where, line, "a row as a mapping of column to value", f"{type(row).__name__}")
    extra = _mapping(row.get("extra_info"), where, line, "extra_info")
    data_source = str(row.get("data_source") or "verl")
    question = extra.get("question") or row.get("question") or _question_from_prompt(row.get("prompt"), where, line)
    if not isinstance(question, str) or not question.strip():
        raise DataFormatError(where, line, "a non-empty question", f"{question!r}")
    answers = _answers(row, where, line)
    example_id = extra.get("example_id") or row.get("id")
    if example_id is None:
        example_id = f"{data_source}-{extra.get('split', 'unknown')}-{extra.get('index', line if line is not None else 0)}"
    if extra.get("metadata_json"):  # a searchgym row: the example's own metadata
        try:
            metadata = json.loads(extra["metadata_json"])
        except (TypeError, ValueError) as e:
            raise DataFormatError(where, line, "extra_info.metadata_json to be a JSON object", f"{extra['metadata_json']!r}") from e
        if not isinstance(metadata, dict):
            raise DataFormatError(where, line, "extra_info.metadata_json to be a JSON object", f"{extra['metadata_json']!r}")
    else:  # another source's row (Search-R1's): where it came from
        metadata = {"data_source": data_source, **{k: extra[k] for k in ("split", "index") if k in extra}}
    return QAExample(str(example_id), question.strip(), answers, metadata)


def _mapping(value: Any, where: object, line: int | None, name: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DataFormatError(where, line, f"{name} to be a mapping", f"{type(value).__name__} {value!r}")
    return value


def _strings(value: Any) -> list[str] | None:
    """A string or a sequence of strings (lists, tuples, numpy arrays) as a list; else None."""
    if isinstance(value, str):
        return [value]
    if value is None or isinstance(value, (bytes, Mapping)) or not hasattr(value, "__iter__"):
        return None
    items = list(value)
    return items if all(isinstance(v, str) for v in items) else None


def _answers(row: Mapping[str, Any], where: object, line: int | None) -> tuple[str, ...]:
    reward_model = _mapping(row.get("reward_model"), where, line, "reward_model")
    truth = reward_model.get("ground_truth")
    if isinstance(truth, Mapping):
        truth = truth.get("target")
    answers = _strings(truth) if truth is not None else _strings(row.get("golden_answers"))
    if not answers:
        raise DataFormatError(
            where, line, "gold answers in reward_model.ground_truth.target (a list of strings) or golden_answers",
            f"reward_model={dict(reward_model)!r}",
        )
    return tuple(answers)


def _question_from_prompt(prompt: Any, where: object, line: int | None) -> str:
    messages = list(prompt) if prompt is not None and not isinstance(prompt, (str, Mapping)) else []
    users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user" and isinstance(m.get("content"), str)]
    if not users or "Question:" not in users[-1]["content"]:
        raise DataFormatError(
            where, line, "the question in extra_info.question, a question column, or a user prompt ending in 'Question: ...'",
            f"prompt={prompt!r}",
        )
    return users[-1]["content"].rsplit("Question:", 1)[1].strip()
