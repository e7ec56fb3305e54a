"""benchmarks/engines.py (issue 67): its quick form runs every engine side by side, where the
engines' venv exists (``.venv-engines``: the command is in the script's docstring); elsewhere
the test says why it skips. Without the engines the script refuses to start and names the venv."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "engines.py"
ENGINES_PYTHON = ROOT / ".venv-engines" / "bin" / "python"


def _has_engines() -> bool:
    if not ENGINES_PYTHON.is_file():
        return False
    done = subprocess.run([str(ENGINES_PYTHON), "-c", "import pyterrier_pisa, tantivy, bm25s"], capture_output=True, timeout=120)
    return done.returncode == 0


@pytest.mark.skipif(not _has_engines(), reason="no .venv-engines with pyterrier-pisa, tantivy and bm25s "
                    "(python3 -m venv .venv-engines; .venv-engines/bin/pip install pyterrier-pisa==0.4.9 tantivy==0.27.0 bm25s "
                    "numpy numba PyStemmer tqdm gymnasium)")
def test_the_quick_form_measures_every_engine_side_by_side(tmp_path):
    done = subprocess.run([str(ENGINES_PYTHON), str(SCRIPT), "--quick", "--workdir", str(tmp_path), "--out", str(tmp_path / "rows.json")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for name in ("searchgym", "pisa", "tantivy", "bm25s"):
        assert f"| {name} | 10 |" in out and f"| {name} | 3 |" in out, out[-3000:]
    assert "| searchgym kernel only | 10 |" in out
    assert "searchgym's cost a query over PISA's batch cost on 1 thread" in out
    import json

    row = json.loads((tmp_path / "rows.json").read_text())["rows"][0]
    engines = row["engines"]
    assert row["passages"] == 5000 and set(engines) == {"searchgym", "pisa", "tantivy", "bm25s"}
    # the same questions, the same ranking function at the same k1 and b: most of PISA's hits are searchgym's
    assert engines["searchgym"]["agree_k10"] > 0.6, engines["searchgym"]
    for e in engines.values():
        assert e["index_bytes"] > 0 and e["one_k10"]["p50_ms"] > 0


def test_without_the_engines_it_refuses_to_start_and_names_the_venv():
    done = subprocess.run([sys.executable, "-c", (
        "import sys, importlib.util; real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'pyterrier_pisa' else real(name, *a)\n"
        f"sys.argv = ['engines.py', '--quick']; sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
        "import engines; engines.main()")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, (done.stdout[-1000:], done.stderr[-2000:])
    assert "pisa (pyterrier_pisa)" in done.stderr and "not importable" in done.stderr and ".venv-engines/bin/pip install pyterrier-pisa==0.4.9" in done.stderr


def test_the_floor_benchmark_counts_what_an_exact_engine_must_do(tmp_path):
    """benchmarks/bm25_floor.py (issue 67, target 3): its quick form builds a 20k-passage corpus
    and index and prints, for k = 3 and 10, the engine's cost and the floors; the floors are
    checked here against each other and against a brute force over the same index."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bm25_floor.py"), "--quick", "--workdir", str(tmp_path),
                           "--out", str(tmp_path / "rows.json")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| 20,000 | 3 |" in done.stdout and "| 20,000 | 10 |" in done.stdout, done.stdout[-2000:]
    assert "one size measured, nothing extrapolated" in done.stdout
    import json

    row = json.loads((tmp_path / "rows.json").read_text())["rows"][0]
    for k in (3, 10):
        m = row[f"k{k}"]
        # a passage whose bounds reach the final threshold holds an essential term, so the engine met it
        assert 0 < m["bound"] <= m["candidates"] and 0 < m["essential"] <= m["postings"], m
        assert m["ms"] > 0 and m["ns_per_candidate"] > 0
    assert row["k10"]["bound"] > row["k3"]["bound"]  # a lower threshold lets more passages reach it


@pytest.mark.parametrize("script, args, message", [
    ("bm25_floor", ["--queries", "0"], "--queries expects a positive integer, got 0"),
    ("bm25_floor", ["--rounds", "0"], "--rounds expects a positive integer, got 0"),
    ("bm25_floor", ["--sizes", "300"], "--sizes expects corpora of at least 1k passages, got [300]"),
    ("bm25_split", ["--queries", "0"], "--queries expects a positive integer, got 0"),
    ("bm25_split", ["--slices", "2,4"], "--slices expects positive integers including 1"),
    ("bm25_split", ["--slices", "1,0"], "--slices expects positive integers including 1"),
    ("bm25_split", ["--sizes", "300"], "--sizes expects corpora of at least 1k passages, got [300]"),
])
def test_the_floor_and_split_benchmarks_refuse_bad_options(script, args, message, capsys):
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(script).parse_args(args)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_the_floor_counts_equal_a_brute_force(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bm25_floor
    import numpy as np

    from searchgym.corpora import Corpus, Passage
    from searchgym.corpora.bm25 import BM25Retriever

    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(60)]
    corpus = Corpus([Passage(str(i), f"t{i}", " ".join(rng.choice(words, size=int(rng.integers(5, 30)), p=_zipf(60)))) for i in range(400)]
                    + [Passage("solo", "solo", "solo w0 w1")])  # 'solo': a query with fewer than k hits (no threshold)
    retriever = BM25Retriever.load(BM25Retriever(corpus).save(tmp_path / "ix"), corpus)
    if not retriever.compiled:
        pytest.skip("numba is not installed: the floor benchmark measures the compiled engine")
    queries = [t for t in retriever.term_ids([" ".join(rng.choice(words, size=int(rng.integers(3, 9)))) for _ in range(40)] + ["solo"]) if t]
    engine = retriever.block_max_engine()
    k = 5
    docs, scores, counts = engine.top_k_many(queries, k)
    got = bm25_floor.floor_counts(engine, queries, k, docs, scores, counts, len(corpus))
    # brute force: a passage's bound is the sum over the distinct query terms it holds of count x term_max
    postings = essential = bound = 0
    for i, q in enumerate(queries):
        theta = float(scores[i, k - 1]) if counts[i] >= k else 0.0
        terms = sorted(set(q), key=lambda t: (q.count(t) * float(engine.term_max[t]), t))  # ties by term id, as np.unique gives them
        lists = {t: set(engine.indices[engine.indptr[t]:engine.indptr[t + 1]].tolist()) for t in terms}
        postings += sum(map(len, lists.values()))
        running = 0.0
        for j, t in enumerate(terms):
            running += q.count(t) * float(engine.term_max[t])
            if running >= theta * (1 - 1e-6):
                essential += sum(len(lists[u]) for u in terms[j:])
                break
        for d in range(len(corpus)):
            held = [q.count(t) * float(engine.term_max[t]) for t in terms if d in lists[t]]
            if held and sum(held) >= theta * (1 - 1e-6):
                bound += 1
    assert got == pytest.approx({"postings": postings / len(queries), "essential": essential / len(queries), "bound": bound / len(queries)})
    assert got["bound"] < got["essential"] < got["postings"]


def _zipf(n):
    import numpy as np

    p = 1.0 / np.arange(1, n + 1)
    return p / p.sum()


def test_the_split_benchmark_measures_one_question_on_several_threads_and_models_more_cores(tmp_path):
    """benchmarks/bm25_split.py (issue 67, target 3): its quick form builds a 20k-passage corpus
    and index, checks every split answer against the whole corpus's (it exits otherwise), and
    prints, for k = 3 and 10 and each slice count, the threaded, alone and modelled times."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bm25_split.py"), "--quick", "--workdir", str(tmp_path),
                           "--out", str(tmp_path / "rows.json")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "### 20,000 passages (40 questions" in out and "| 10 | 8 |" in out and "| 3 | 1 |" in out, out[-3000:]
    assert "not split: under 2 x SLICE_MIN = 1,000,000 passages" in out and "one size measured, nothing extrapolated" in out
    import json

    row = json.loads((tmp_path / "rows.json").read_text())["rows"][0]
    assert row["passages"] == 20_000 and row["handoff_two_ms"] >= 0 and row["handoff_each_ms"] > 0
    for k in (3, 10):
        m = row[f"k{k}"]
        assert m["work_s1"] == 1.0 and m["threaded_s1_p50"] > 0 and m["search_split_p50"] > 0
        for s in (1, 2, 4, 8):
            # times, so nothing is compared but what holds by construction: the model adds the work
            # around the ranges and the hand-off (neither negative) to the longest range alone
            assert m[f"alone_s{s}_p50"] > 0 and m[f"known_s{s}_p50"] > 0 and m[f"work_s{s}"] > 0, (k, s, m)
            assert m[f"model_s{s}_p50"] >= m[f"alone_s{s}_p50"] and m[f"model_s{s}_p99"] >= m[f"alone_s{s}_p99"], (k, s, m)
