"""BrowseComp-Plus's files by path play the browse game: look-alike files with the released
fields (the corpus's docid / text / url, the decrypted queries, the qrels) load into
DeepResearch-v0, the labels reach the scores, and the oracle reads and cites the evidence."""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym  # noqa: F401 -- registers the ids
from searchgym.agents import Task, make_agent, run_episodes
from searchgym.corpora.browsecomp import read_qrels, write_browsecomp_like
from searchgym.envs.access import search_env


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_browsecomp_like(tmp_path_factory.mktemp("bcp"), num_docs=60, num_queries=5, seed=3)


def make(files, **options):
    return gym.make("searchgym/DeepResearch-v0", corpus=str(files.corpus), dataset=str(files.queries),
                    dataset_options={"qrels_evidence": str(files.qrels_evidence), "qrels_gold": str(files.qrels_gold)}, **options)


def test_the_files_load_with_the_qrels_as_labels(files):
    env = search_env(make(files))
    evidence, gold = read_qrels(files.qrels_evidence), read_qrels(files.qrels_gold)
    assert len(env.examples) == 5
    for example in env.examples:
        assert example.metadata["evidence_ids"] == evidence.get(example.id, example.metadata["evidence_ids"])
        assert example.metadata["gold_ids"] == gold.get(example.id, example.metadata["gold_ids"])
        assert all(doc in env.corpus for doc in example.metadata["evidence_ids"] + example.metadata["gold_ids"])


def test_a_browsecomp_document_opens_page_by_page(files):
    env = make(files)
    _, info = env.reset(seed=0)
    doc = search_env(env).example.metadata["gold_ids"][0]
    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "open", "arguments": {"doc_id": doc}}}]}
    obs, *_ = env.step(call)
    pages = search_env(env).protocol.store.pages(doc)
    assert obs.startswith(f"[{doc}] ") and f"(page 1 of {pages})" in obs.split("\n")[0] and pages > 1


@pytest.mark.parametrize("action_format", ["tools", "tags"])
def test_the_oracle_reads_and_cites_the_evidence_of_browsecomp_files(files, action_format):
    envs = [make(files, action_format=action_format) for _ in range(2)]
    agent = make_agent("oracle", envs[0])
    results = run_episodes(envs, agent, [Task(ex.id, 0) for ex in search_env(envs[0]).examples])
    assert len(results) == 5
    for r in results:
        assert r.outcome == "answered" and r.reward_components["correct"] == 1.0
        assert r.reward_components["evidence_recall"] == 1.0 and r.reward_components["gold_recall"] == 1.0
