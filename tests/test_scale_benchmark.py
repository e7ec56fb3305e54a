"""benchmarks/scale.py: its generator writes wiki-18-shaped FlashRAG lines that searchgym
reads, deterministic by seed; bad arguments are refused before anything is written."""

import json
import subprocess
import sys
from pathlib import Path

SCALE = Path(__file__).resolve().parents[1] / "benchmarks" / "scale.py"
sys.path.insert(0, str(SCALE.parent))  # the generator is imported below

import scale  # noqa: E402

from searchgym.corpora import load_corpus  # noqa: E402


def test_generated_lines_are_flashrag_passages_of_wiki18_shape(tmp_path):
    path = tmp_path / "passages.jsonl"
    stats = scale.write_flashrag_corpus(path, 3000, seed=7)

    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3000 and stats["passages"] == 3000
    objects = [json.loads(line) for line in lines]
    assert all(set(o) == {"id", "contents"} for o in objects)
    assert [o["id"] for o in objects] == [str(i) for i in range(3000)]
    assert stats["bytes"] == path.stat().st_size
    # wiki-18's lines are ~684 bytes; ids here are shorter than its 8 digits.
    assert 600 <= stats["mean_line_bytes"] <= 720, stats

    corpus = load_corpus(path)
    assert len(corpus) == 3000 and corpus.get("2999").id == "2999"
    titles = [p.title for p in corpus]
    assert all(titles) and all(p.text for p in corpus)
    # Consecutive passages of an article share its title: 1 to 20 of them.
    runs, length = [], 1
    for previous, title in zip(titles, titles[1:]):
        if title == previous:
            length += 1
        else:
            runs.append(length)
            length = 1
    assert max(runs) <= 20 and 2 <= sum(runs) / len(runs) <= 5
    words = [len(p.text.split()) for p in corpus]
    assert max(words) == 100 and min(words) >= 50
    # A Zipf vocabulary: a few function words are most of the text, and a long tail.
    counts: dict[str, int] = {}
    for p in corpus:
        for w in p.text.lower().split():
            counts[w.strip(".,")] = counts.get(w.strip(".,"), 0) + 1
    top = sorted(counts.values(), reverse=True)
    assert counts["the"] == top[0] and len(counts) > 20_000


def test_the_generator_is_deterministic_by_seed(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    scale.write_flashrag_corpus(a, 500, seed=1)
    scale.write_flashrag_corpus(b, 500, seed=1)
    scale.write_flashrag_corpus(c, 500, seed=2)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_queries_are_words_of_the_corpus(tmp_path):
    path = tmp_path / "passages.jsonl"
    scale.write_flashrag_corpus(path, 300, seed=0)
    queries = scale.write_queries(path, 50, seed=0)
    assert queries == scale.write_queries(path, 50, seed=0) and len(queries) == 50
    vocabulary = set(path.read_text(encoding="utf-8").replace('\\"', " ").replace("\\n", " ").replace(".", " ").replace(",", " ").split())
    assert all(2 <= len(q.split()) <= 6 and set(q.split()) <= vocabulary for q in queries)


def test_bad_arguments_are_refused():
    for args, message in [
        (("--sections", "open,query"), "--sections takes open, build, serve, latency, env, got open,query"),
        (("--sizes", "0"), "expects a positive passage count such as 20k, 1M or 300000, got '0'"),
        (("--queries", "0"), "--queries must be positive, got 0"),
    ]:
        done = subprocess.run([sys.executable, str(SCALE), *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_env_questions_have_answers_that_survive_normalization(tmp_path):
    from searchgym.corpora.registry import load_dataset

    path = tmp_path / "qa.jsonl"
    scale.write_env_questions(path, ["the had on most", "Ploner rangly vaal", "the a an", "an dan from"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    # "the a an" has no word that keeps a word after normalization: no question from it
    assert [r["golden_answers"] for r in rows] == [["had"], ["Ploner"], ["dan"]]
    assert [ex.answers for ex in load_dataset(str(path))] == [("had",), ("Ploner",), ("dan",)]
