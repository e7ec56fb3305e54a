"""The oracle demo's chart: the rewards its text is about, and question sets named in full."""

import pytest

pytest.importorskip("matplotlib")

from searchgym.oracle_demo import chart  # noqa: E402

ORACLE = [
    {"env": "searchgym/RSearch-v0", "reward_name": "r_search", "episodes": 200, "reward": 2.4, "context_tokens": 612},
    {"env": "searchgym/S3-v0", "reward_name": "s3_gbr", "episodes": 200, "reward": 0.44, "context_tokens": 1765},
]
RETRIEVAL = [
    {"questions": "wiki-vital", "retriever": "bm25", "top1": 0.5, "top5": 0.7},
    {"questions": "wiki-vital-answerable", "retriever": "dense", "top1": 0.8, "top5": 1.0},
]


def test_the_chart_draws_each_protocols_reward_with_its_recipe_and_names_the_question_sets():
    import matplotlib.pyplot as plt

    fig = chart(ORACLE, RETRIEVAL)
    try:
        rewards, context, retrieval = fig.axes
        assert rewards.get_title() == "synthwiki oracle: reward per protocol"
        assert [bar.get_height() for bar in rewards.patches] == [2.4, 0.44]
        assert [t.get_text() for t in rewards.texts] == ["2.40\nr_search", "0.44\ns3_gbr"]
        assert [bar.get_height() for bar in context.patches] == [612, 1765]
        labels = [t.get_text() for t in retrieval.get_xticklabels()]
        assert labels == ["bm25\nall sub-questions", "dense\nanswerable\n(answer in the article)"]
        assert "wv" not in " ".join(labels)
        assert "200 synthwiki dev questions" in fig._suptitle.get_text()
    finally:
        plt.close(fig)
