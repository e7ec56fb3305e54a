"""Training on the browse game through tool calls: ``searchgym train --env-id DeepResearch-v0``
runs GRPO on the tiny random model over a small world, its token records are the chat
template's render of the conversation, and an update on the oracle's multi-turn tool episodes
(search, parallel opens with integer pages, an answer with an array of citations and a numeric
confidence) recomputes their logprobs and trains only the calls."""

from __future__ import annotations

import copy
import csv
import json

import pytest

torch = pytest.importorskip("torch")

from deepresearch.small_world import world  # noqa: E402
from lm_helpers import rescored_samples  # noqa: E402
from searchgym.agents.driver import Task, run_episodes  # noqa: E402
from searchgym.agents.tokens import render_chat  # noqa: E402
from searchgym.deepresearch.agents import DeepResearchOracle  # noqa: E402
from searchgym.envs.access import search_env  # noqa: E402
from searchgym.lm.chat_templates import install_chat_template  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer  # noqa: E402
from searchgym.training.args import Args  # noqa: E402
from searchgym.training.batch import collate  # noqa: E402
from searchgym.training.sft import TeacherAgent  # noqa: E402
from searchgym.training.trainer import Trainer  # noqa: E402

#: Short snippets and pages and two hits a search keep the tiny tokenizer's (about 1.4
#: characters a token) episodes within a few thousand tokens.
PROTOCOL = {"snippet_words": 40, "page_words": 100}


def small_world(tmp_path):
    """The small world as ``--env-options`` name it: the corpus JSONL and a FlashRAG JSONL of its questions."""
    corpus, questions = world(tmp_path)
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps({"id": q.id, "question": q.question, "golden_answers": list(q.answers),
                                           "metadata": q.metadata}) + "\n" for q in questions))
    return {"corpus": str(corpus), "dataset": str(dataset), "top_k": 2, "protocol_options": PROTOCOL}


def tiny_long_model(tmp_path):
    """The trainer tests' tiny random Llama (hidden 128, head size 64) with a 16k window: the
    game's prompt alone (its four tools' schemas) is about 2,300 tokens of the tiny tokenizer,
    past the 2,048 of ``tiny_model_folder()``."""
    folder = tmp_path / "tiny-16k"
    tiny_causal_lm(0, hidden_size=128, num_attention_heads=2, context=16384).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)


def test_searchgym_train_runs_grpo_on_deep_research_through_tool_calls(tmp_path):
    from searchgym.cli import main

    options = {**small_world(tmp_path), "max_turns": 3}
    out = tmp_path / "run"
    assert main([
        "train", "--env-id", "DeepResearch-v0", "--env-options", json.dumps(options), "--model", tiny_long_model(tmp_path),
        "--chat-template", "hermes", "--algorithm", "grpo", "--n", "2", "--total-steps", "2", "--questions-per-step", "2",
        "--num-envs", "4", "--max-new-tokens", "16", "--micro-batch-size", "2", "--lr", "1e-3", "--out", str(out),
        "--no-progress", "--no-tensorboard", "--threads", "1", "--seed", "0",
    ]) == 0
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [r["step"] for r in rows] == ["1", "2"] and all(r["episodes"] == "4" and r["dropped"] == "0" for r in rows)
    # The trainer's own check of the records: the logprobs the model gives the recorded tokens
    # in the update are the ones sampled (the record is what the model read and wrote).
    assert all(float(r["logprob_diff_max"]) < 1e-3 and float(r["loss"]) == float(r["loss"]) for r in rows)
    records = [json.loads(line) for line in (out / "rollouts.jsonl").open()]
    assert {r["step"] for r in records} == {1, 2} and all(set(r["reward_components"]) >= {"correct", "evidence_recall", "citation_precision"} for r in records)
    assert (out / "final" / "config.json").is_file() and (out / "curves.png").is_file()


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dr-train")
    trainer = Trainer(Args(
        model=tiny_long_model(tmp_path), chat_template="hermes", env_id="searchgym/DeepResearch-v0",
        env_options={**small_world(tmp_path), "max_turns": 3}, algorithm="grpo", n=2, out=str(tmp_path / "run"),
        total_steps=1, questions_per_step=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3,
        progress=False, tensorboard=False, seed=0, threads=1,
    ))
    trainer.build()
    return trainer


def test_the_rollout_prompt_is_the_templates_render_of_the_games_messages_and_tools(trainer):
    results, _ = trainer.rollout(0)
    env = trainer.envs[0]
    _, info = env.reset(options={"example_id": results[0].example_id})
    assert [t["function"]["name"] for t in info["tools"]] == ["search", "answer", "open", "find"]
    prompt = tuple(trainer.tokenizer.encode(render_chat(trainer.tokenizer, info["messages"], info["tools"], generation_prompt=True),
                                            add_special_tokens=False))
    assert all(r.trajectory.prompt_ids == prompt for r in results if r.example_id == results[0].example_id)
    assert '"citations"' in trainer.tokenizer.decode(prompt) and "<tools>" in trainer.tokenizer.decode(prompt)


def oracle_tool_trajectories(trainer, limit=2):
    """The game's oracle played through the policy's chat template (TeacherAgent keeps an LM agent's record)."""
    tok = copy.deepcopy(tiny_tokenizer())
    install_chat_template(tok, "hermes")
    envs = trainer.envs[:2]
    agent = TeacherAgent(DeepResearchOracle.for_env(envs[0]), tok, search_env(envs[0]).protocol)
    agent.check_env(envs[0])
    examples = search_env(envs[0]).examples[:limit]
    results = run_episodes(envs, agent, [Task(ex.id, 0) for ex in examples], keep_trajectories=True)
    assert [r.em for r in results] == [1.0] * limit and all(r.reward == 1.0 for r in results)
    return tok, [r.trajectory for r in results]


def test_oracle_tool_records_are_exact_and_a_grpo_update_on_them_trains_only_the_calls(trainer):
    tok, trajectories = oracle_tool_trajectories(trainer)
    for t in trajectories:
        assert t.render_mismatch is None  # each step's record was the template's render of the conversation
        generated = [tok.decode(s.token_ids) for s in t.segments if s.generated]
        observed = [tok.decode(s.token_ids) for s in t.segments if not s.generated]
        assert len(generated) == 3 and all(g.endswith("</tool_call><|im_end|>") for g in generated)
        assert '{"name": "search", "arguments": {"query": ' in generated[0]
        assert generated[1].count('{"name": "open", "arguments": {"doc_id": ') == 3 and '"page": ' in generated[1]
        assert '{"name": "answer", "arguments": {"answer": ' in generated[2] and '"citations": ["p' in generated[2]
        assert '"confidence": 100' in generated[2]
        assert all(o.startswith("\n<|im_start|>user\n<tool_response>\n") and o.endswith("<|im_start|>assistant\n") for o in observed)
        assert sum(t.loss_mask) == sum(len(s) for s in t.segments if s.generated)
        batch = collate([t])
        assert batch.loss_mask[0].tolist() == ([0] * len(t.prompt_ids) + t.loss_mask)[1:]  # targets: masks shifted by one
    samples = rescored_samples(trainer, trajectories)
    stats = trainer.update(samples)
    assert stats["logprob_diff_max"] < 1e-3 and stats["grad_norm"] > 0
