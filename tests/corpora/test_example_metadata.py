"""The metadata a recipe reads about a question: synthwiki's facts hop by hop, and every extra
field of a FlashRAG-style line (HotpotQA's supporting facts, MuSiQue's decomposition), as far
as the episode a recipe scores."""

import json

import gymnasium as gym

import searchgym  # noqa: F401  (registers the ids)
from searchgym.corpora.datasets import read_qa
from searchgym.corpora.synthwiki import generate
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer
from searchgym.rewards import RewardRecipe, RewardResult, span_check


def test_synthwiki_gives_each_hop_its_passage_answer_evidence_and_query():
    world = generate(seed=7, num_passages=400)
    for q in world.all_questions:
        meta = q.metadata
        hops = meta["hop_facts"]
        assert len(hops) == meta["hops"]
        assert [h["passage_id"] for h in hops] == meta["supporting_ids"]
        assert [h["evidence"] for h in hops] == meta["evidence"]
        assert [h["query"] for h in hops] == meta["oracle_queries"]
        if meta["type"] == "comparison":
            assert [h["answer"] for h in hops] == meta["bridge_answers"]  # the two compared values
        else:
            assert [h["answer"] for h in hops] == [*meta["bridge_answers"], q.answers[0]]
        for h in hops:
            assert h["evidence"] in world.corpus.get(h["passage_id"]).text
            assert span_check(h["evidence"], [h["answer"]]), (q.id, h)  # the sentence states the hop's answer


def test_synthwiki_questions_do_not_change_with_the_new_metadata():
    a, b = generate(seed=3, num_passages=400), generate(seed=3, num_passages=400)
    assert [(q.id, q.question, q.answers, q.candidates, q.metadata) for q in a.all_questions] == \
        [(q.id, q.question, q.answers, q.candidates, q.metadata) for q in b.all_questions]
    json.dumps([q.metadata for q in a.all_questions])


HOTPOT = {
    "id": "5a8b57f25542995d1e6f1371", "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "golden_answers": ["yes"],
    "metadata": {"type": "comparison", "level": "hard",
                 "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]}},
}
MUSIQUE = {
    "id": "2hop__1", "question": "Who founded the company that makes the Walkman?", "golden_answers": ["Masaru Ibuka"],
    "question_decomposition": [{"id": 1, "question": "Walkman >> manufacturer", "answer": "Sony", "paragraph_support_idx": 3},
                               {"id": 2, "question": "Who founded #1?", "answer": "Masaru Ibuka", "paragraph_support_idx": 5}],
    "answerable": True,
}


def test_a_flashrag_file_keeps_every_extra_field_in_the_metadata(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in (HOTPOT, MUSIQUE)) + "\n")
    hotpot, musique = read_qa(path)
    assert dict(hotpot.metadata) == HOTPOT["metadata"]
    assert dict(musique.metadata) == {"question_decomposition": MUSIQUE["question_decomposition"], "answerable": True}


class Keeping(RewardRecipe):
    name = "keeping"

    def __init__(self):
        super().__init__()
        self.scored = []

    def score(self, episode):
        self.scored.append(episode)
        return RewardResult(0.0, {})


def test_a_recipe_reads_the_extra_fields_of_its_question(tmp_path):
    path = tmp_path / "musique.jsonl"
    path.write_text(json.dumps(MUSIQUE) + "\n")
    recipe = Keeping()
    env = gym.make("searchgym/SearchR1-v0", corpus_options={"seed": 7, "num_passages": 400}, dataset=str(path), reward=recipe)
    env.reset(seed=0)
    env.step(search_env(env).protocol.write([Answer("Sony")]))
    episode = recipe.scored[-1]
    assert episode.example_id == "2hop__1"
    assert [d["answer"] for d in episode.metadata["question_decomposition"]] == ["Sony", "Masaru Ibuka"]
