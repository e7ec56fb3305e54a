"""BrowseComp-Plus's released files, read by path: the corpus export (docid, text, url), the
decrypted queries, the TREC qrels; and the look-alike files that stand in for them here."""

import json
import re
import subprocess
import sys

import pytest

from searchgym.corpora.browsecomp import (
    QRELS_LINE_FORMAT,
    SEARCH_K,
    SNIPPET_TOKENS,
    apply_qrels,
    read_qrels,
    write_browsecomp_like,
)
from searchgym.corpora.datasets import BROWSECOMP_LINE_FORMAT, QA_LINE_FORMAT, read_qa
from searchgym.corpora.registry import load_corpus, load_dataset
from searchgym.corpora.store import DOCUMENT_LINE_FORMAT, PASSAGE_LINE_FORMAT, document_title
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_browsecomp_like(tmp_path_factory.mktemp("bcp"), num_docs=40, num_queries=6, seed=3)


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def official_title(text):
    """The title as BrowseComp-Plus's own search_r1_server.py takes it: the front matter's second line, else the first line."""
    if text.startswith("---\ntitle:"):
        return text.split("\n")[1].strip('"')[7:]
    return text.split("\n")[0].strip('"')


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


# ------------------------------------------------------------------------ the generated files


def test_the_generated_files_have_the_real_shapes(files):
    docs = lines(files.corpus)
    assert len(docs) == 40 and all(list(d) == ["docid", "text", "url"] for d in docs)
    assert all(d["docid"].isdigit() and int(d["docid"]) < 100_195 for d in docs) and len({d["docid"] for d in docs}) == 40
    assert all(len(d["text"].split()) > 1500 for d in docs)  # long web pages (the real ones average 5,179 words)
    fronted = [d for d in docs if d["text"].startswith("---\ntitle: ")]
    assert 20 <= len(fronted) < 40  # most, not all, open with the front matter
    assert all(re.match(r"---\ntitle: [^\n]+\n(author: [^\n]+\n)?date: \d{4}-\d\d-\d\d\n---\n", d["text"]) for d in fronted)
    queries = lines(files.queries)
    assert len(queries) == 6
    for q in queries:
        assert list(q) == ["query_id", "query", "answer", "gold_docs", "negative_docs", "evidence_docs"]
        for key in ("gold_docs", "negative_docs", "evidence_docs"):
            assert all(list(doc) == ["docid", "text", "url"] for doc in q[key])
        assert q["answer"] in q["gold_docs"][0]["text"] and q["answer"] not in q["query"]
    evidence = files.qrels_evidence.read_text().splitlines()
    assert len(evidence) == 18 and all(re.fullmatch(r"\d+ Q0 \d+ 1", line) for line in evidence)
    assert len(files.qrels_gold.read_text().splitlines()) == 12


def test_the_same_arguments_write_the_same_bytes(tmp_path, files):
    again = write_browsecomp_like(tmp_path / "again", num_docs=40, num_queries=6, seed=3)
    for a, b in zip(files[1:], again[1:]):
        assert a.read_bytes() == b.read_bytes() and a.name == b.name
    other = write_browsecomp_like(tmp_path / "other", num_docs=40, num_queries=6, seed=4)
    assert other.corpus.read_bytes() != files.corpus.read_bytes()
    with pytest.raises(ConfigError, match=re.escape("write_browsecomp_like expects num_docs >= 4 * num_queries")):
        write_browsecomp_like(tmp_path / "small", num_docs=10, num_queries=3)
    with pytest.raises(ConfigError, match=re.escape("write_browsecomp_like expects doc_words to be a positive integer, got 0.")):
        write_browsecomp_like(tmp_path / "bad", doc_words=0)


# ----------------------------------------------------------------------------------- corpus


def test_the_corpus_loads_by_path_with_ids_titles_and_texts_exact(files):
    corpus = load_corpus(str(files.corpus))
    docs = lines(files.corpus)
    assert len(corpus) == len(docs)
    assert [(p.id, p.title, p.text) for p in corpus] == [(d["docid"], official_title(d["text"]), d["text"]) for d in docs]
    some = docs[7]
    assert corpus.get(some["docid"]).text == some["text"]
    assert load_corpus(files.corpus).fingerprint == corpus.fingerprint  # a Path as well as a str


def test_an_integer_docid_a_title_field_and_a_missing_url_work(tmp_path):
    path = write(tmp_path / "docs.jsonl", [
        {"docid": 7, "text": "---\ntitle: \"Quoted title\"\nauthor: A. B.\ndate: 2020-02-11\n---\nQuoted title\n\nBody.", "url": "https://a.example/x"},
        {"docid": "8", "text": "First line here\nsecond line", "url": "https://b.example/y", "title": "Given"},
        {"docid": 9, "text": "\n\n  \n", "url": "https://c.example/empty"},
        {"docid": 10, "text": "# Heading\nbody", "url": None},
        {"id": "11", "docid": "ignored", "title": "T", "text": "an id line keeps the id layout"},
    ])
    corpus = load_corpus(path)
    assert [(p.id, p.title, p.text) for p in corpus] == [
        ("7", "Quoted title", "---\ntitle: \"Quoted title\"\nauthor: A. B.\ndate: 2020-02-11\n---\nQuoted title\n\nBody."),
        ("8", "Given", "First line here\nsecond line"),
        ("9", "https://c.example/empty", "\n\n  \n"),
        ("10", "Heading", "# Heading\nbody"),
        ("11", "T", "an id line keeps the id layout"),
    ]
    assert corpus.get("7").id == "7"


def test_document_titles():
    assert document_title("---\ntitle: How we made it\nauthor: P. H.\ndate: 2020-02-11\n---\nKevin Connor, director") == "How we made it"
    assert document_title("---\ndate: 2020-01-01\ntitle: 'Second key'\n---\nbody") == "Second key"
    assert document_title("---\ntitle:\ndate: 2020-01-01\n---\n\nThe body's first line\nmore") == "The body's first line"
    assert document_title("---\nnot closed\nreal text") == "not closed"
    assert document_title("\r\n  \"Windows line\"  \r\nbody") == "Windows line"
    assert document_title("", "https://u.example") == "https://u.example"
    assert document_title("---\n---\n") == ""
    long = " ".join(["word"] * 100)
    title = document_title(long)
    assert len(title) <= 200 and title.endswith("word...") and long.startswith(title[:-3])
    assert document_title("x" * 300) == "x" * 197 + "..."


def test_bad_corpus_lines_are_typed_errors_naming_the_line_and_the_layout(tmp_path):
    good = {"docid": "1", "text": "t", "url": "u"}
    cases = [
        ({"docid": "2", "url": "u"}, "an object with keys ['docid', 'url'] (no 'text')"),
        ({"docid": [2], "text": "t"}, "'docid' = list [2]"),
        ({"docid": True, "text": "t"}, "'docid' = bool true"),
        ({"docid": "2", "text": 3}, "'text' = int 3"),
        ({"docid": "2", "text": "t", "url": 5}, "'url' = int 5"),
        ({"docid": "2", "text": "t", "title": None}, "'title' = NoneType null"),
    ]
    for i, (line, got) in enumerate(cases):
        path = write(tmp_path / f"bad{i}.jsonl", [good, line])
        with pytest.raises(DataFormatError) as e:
            load_corpus(path)
        assert str(e.value) == f"{path}, line 2: expected {DOCUMENT_LINE_FORMAT}, got {got}."
        assert e.value.line == 2
    # A repeated docid is a repeated passage id.
    path = write(tmp_path / "twice.jsonl", [good, {"docid": 1, "text": "again"}])
    with pytest.raises(DataFormatError, match=re.escape(f"{path}, line 2: expected unique passage ids, got id '1' again (first on line 1)")):
        load_corpus(path)
    # The other layouts keep their messages.
    path = write(tmp_path / "old.jsonl", [{"title": "T", "text": "x"}])
    with pytest.raises(DataFormatError) as e:
        load_corpus(path)
    assert str(e.value) == f"{path}, line 1: expected {PASSAGE_LINE_FORMAT}, got an object with keys ['title', 'text'] (no 'id')."


def test_a_corpus_parquet_gets_the_command_that_converts_it_and_the_command_works(tmp_path, files):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("pandas")
    docs = lines(files.corpus)[:5]
    folder = tmp_path / "hf corpus"  # a space: the command quotes the paths
    folder.mkdir()
    path = folder / "train-00000-of-00007.parquet"
    pq.write_table(pa.table({k: [d[k] for d in docs] for k in ("docid", "text", "url")}), path)
    with pytest.raises(DataFormatError) as e:
        load_corpus(path)
    message = str(e.value)
    target = folder / "train-00000-of-00007.jsonl"
    assert message.startswith(
        f"{path}: expected a JSON-lines passage file (one JSON object per line, plain or gzip-compressed), got a Parquet "
        "file with the BrowseComp-Plus corpus columns (docid, text, url); the passage store reads JSON lines: convert it once "
        "with `python -c 'import sys, pandas; pandas.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient=\"records\", "
        "lines=True, force_ascii=False)' "
    )
    assert message.endswith(f"` and pass {target} (docs/browsecomp-plus.md exports the whole corpus, all its shards, to one file).")
    command = re.search(r"`(python -c .*)`", message).group(1)
    subprocess.run(command.replace("python -c", f"{sys.executable} -c", 1), shell=True, check=True, cwd=tmp_path, timeout=120)
    corpus = load_corpus(target)
    assert [(p.id, p.title, p.text) for p in corpus] == [(d["docid"], official_title(d["text"]), d["text"]) for d in docs]
    # The obfuscated queries parquet points to the decryption script.
    queries = tmp_path / "test-00000-of-00003.parquet"
    pq.write_table(pa.table({"query_id": ["1"], "query": ["x"], "answer": ["y"], "evidence_docs": [[{"docid": "1", "text": "t", "url": "u"}]]}), queries)
    with pytest.raises(DataFormatError, match=re.escape(
            "got a Parquet file of the BrowseComp-Plus queries, which are obfuscated; decrypt them with the BrowseComp-Plus "
            "repository's `python scripts_build_index/decrypt_dataset.py --output data/browsecomp_plus_decrypted.jsonl`")):
        load_dataset(queries)


# ---------------------------------------------------------------------------------- queries


def test_the_queries_load_by_path_with_ids_answers_and_metadata_exact(files):
    examples = load_dataset(str(files.queries))
    raw = lines(files.queries)
    assert [(e.id, e.question, e.answers) for e in examples] == [(q["query_id"], q["query"], (q["answer"],)) for q in raw]
    for example, q in zip(examples, raw):
        assert dict(example.metadata) == {
            "evidence_ids": [d["docid"] for d in q["evidence_docs"]],
            "gold_ids": [d["docid"] for d in q["gold_docs"]],
            "negative_ids": [d["docid"] for d in q["negative_docs"]],
            "source": "browsecomp-plus",
        }
        assert example.candidates == ()


def test_plain_ids_integer_query_ids_and_missing_lists(tmp_path):
    path = write(tmp_path / "q.jsonl", [
        {"query_id": 769, "query": "Which?", "answer": "Ann Bee", "evidence_docs": ["5412", 18639], "gold_docs": [{"docid": 5412}]},
        {"query_id": "770", "query": "What?", "answer": 1984},
    ])
    first, second = read_qa(path)
    assert (first.id, first.answers, dict(first.metadata)) == (
        "769", ("Ann Bee",), {"evidence_ids": ["5412", "18639"], "gold_ids": ["5412"], "negative_ids": [], "source": "browsecomp-plus"})
    assert (second.id, second.answers, dict(second.metadata)) == (
        "770", ("1984",), {"evidence_ids": [], "gold_ids": [], "negative_ids": [], "source": "browsecomp-plus"})


def test_bad_query_lines_are_typed_errors_naming_the_line_and_the_layout(tmp_path):
    good = {"query_id": "1", "query": "Which?", "answer": "Ann"}
    cases = [
        ({"query_id": "2", "query": "Q?"}, "an object with keys ['query_id', 'query'] (no 'answer')"),
        ({"query": "Q?", "answer": "A"}, "an object with keys ['query', 'answer'] (no 'query_id')"),
        ({"query_id": "2", "answer": "A", "evidence_docs": []}, "an object with keys ['query_id', 'answer', 'evidence_docs'] (no 'query')"),
        ({"query_id": 1.5, "query": "Q?", "answer": "A"}, "'query_id' = float 1.5"),
        ({"query_id": "2", "query": " ", "answer": "A"}, "'query' = str \" \""),
        ({"query_id": "2", "query": "Q?", "answer": ["A"]}, "'answer' = list [\"A\"]"),
        ({"query_id": "2", "query": "Q?", "answer": "Ann", "gold_docs": "5412"}, "'gold_docs' = str \"5412\""),
        ({"query_id": "2", "query": "Q?", "answer": "Ann", "evidence_docs": [{"text": "t"}]}, "'evidence_docs' containing an object with keys ['text']"),
        ({"query_id": "2", "query": "Q?", "answer": "Ann", "negative_docs": [None]}, "'negative_docs' containing NoneType null"),
    ]
    for i, (line, got) in enumerate(cases):
        path = write(tmp_path / f"bad{i}.jsonl", [good, line])
        with pytest.raises(DataFormatError) as e:
            load_dataset(path)
        assert str(e.value) == f"{path}, line 2: expected {BROWSECOMP_LINE_FORMAT}, got {got}."
    path = write(tmp_path / "blank.jsonl", [{"query_id": "2", "query": "Q?", "answer": "The"}])
    with pytest.raises(DataFormatError, match=re.escape(
            f"{path}, line 1: expected an 'answer' that keeps a word after normalization (lowercased, punctuation and the "
            "articles a/an/the removed), got 'answer' = str \"The\", which every metric would match to an empty answer")):
        load_dataset(path)
    path = write(tmp_path / "twice.jsonl", [good, good])
    with pytest.raises(DataFormatError, match=re.escape(f"{path}, line 2: expected unique example ids, got id '1' again")):
        load_dataset(path)


def test_the_flashrag_layout_is_unchanged(tmp_path):
    path = write(tmp_path / "qa.jsonl", [{"id": "a", "question": "Who?", "golden_answers": ["Ann"], "query": "kept as metadata"}])
    (example,) = load_dataset(path)
    assert (example.id, example.answers, dict(example.metadata)) == ("a", ("Ann",), {"query": "kept as metadata"})
    path = write(tmp_path / "bad.jsonl", [{"id": "a", "query": "Who?", "golden_answers": ["Ann"]}])
    with pytest.raises(DataFormatError) as e:
        load_dataset(path)
    assert str(e.value) == f"{path}, line 1: expected {QA_LINE_FORMAT}, got an object with keys ['id', 'query', 'golden_answers'] (no 'question')."


# ------------------------------------------------------------------------------------ qrels


def test_read_qrels_keeps_relevant_docs_in_order(tmp_path, files):
    path = write(tmp_path / "qrels.txt", [
        "769 Q0 18639 1", "769 Q0 41759 1", "", "770 0 9 0", "769\tQ0\t5412\t2", "769 Q0 18639 1", "771 Q0 3 -1", "770 Q0 8 1",
    ])
    assert read_qrels(path) == {"769": ["18639", "41759", "5412"], "770": ["8"], "771": []}
    evidence = read_qrels(files.qrels_evidence)
    assert evidence == {q["query_id"]: sorted(d["docid"] for d in q["evidence_docs"]) for q in lines(files.queries)}


def test_malformed_qrels_are_typed_errors(tmp_path):
    for i, (line, got) in enumerate([
        ("769 Q0 18639", "3 fields: '769 Q0 18639'"),
        ("769 Q0 18639 1 extra", "5 fields: '769 Q0 18639 1 extra'"),
        ("769 Q0 18639 yes", "relevance 'yes', not an integer"),
        ('{"query_id": "769"}', "2 fields: '{\"query_id\": \"769\"}'"),
    ]):
        path = write(tmp_path / f"bad{i}.txt", ["1 Q0 2 1", line])
        with pytest.raises(DataFormatError) as e:
            read_qrels(path)
        assert str(e.value) == f"{path}, line 2: expected {QRELS_LINE_FORMAT}, got {got}."
    missing = tmp_path / "qrel_gold.txt"
    with pytest.raises(DataFileNotFoundError, match=re.escape(f"No such qrels file: {str(missing)!r}; expected a TREC qrels file")):
        read_qrels(missing)
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}: expected a TREC qrels file")):
        read_qrels(tmp_path)


def test_qrels_fill_and_override_the_lines_ids(tmp_path, files):
    raw = lines(files.queries)
    first, second = raw[0]["query_id"], raw[1]["query_id"]
    # Decrypted lines without their document lists: the qrels fill them in.
    bare = write(tmp_path / "bare.jsonl", [{k: q[k] for k in ("query_id", "query", "answer")} for q in raw])
    examples = load_dataset(bare, qrels_evidence=str(files.qrels_evidence), qrels_gold=files.qrels_gold)
    for example, q in zip(examples, raw):
        assert dict(example.metadata) == {
            "evidence_ids": sorted(d["docid"] for d in q["evidence_docs"]),
            "gold_ids": sorted(d["docid"] for d in q["gold_docs"]),
            "negative_ids": [],
            "source": "browsecomp-plus",
        }
    # The qrels win over the line; a question they do not name keeps its line's ids.
    gold = write(tmp_path / "gold.txt", [f"{first} Q0 999 1", f"{first} Q0 111 1", "99999 Q0 5 1"])
    examples = load_dataset(files.queries, qrels_gold=gold)
    assert examples[0].metadata["gold_ids"] == ["999", "111"]
    assert examples[0].metadata["evidence_ids"] == [d["docid"] for d in raw[0]["evidence_docs"]]
    assert examples[1].id == second and examples[1].metadata["gold_ids"] == [d["docid"] for d in raw[1]["gold_docs"]]
    # Mappings work too, and the examples given are not changed.
    plain = load_dataset(files.queries)
    changed = apply_qrels(plain, evidence={first: ["1"]})
    assert changed[0].metadata["evidence_ids"] == ["1"] and plain[0].metadata["evidence_ids"] != ["1"]


def test_qrels_options_are_checked(tmp_path, files):
    other = write(tmp_path / "other.txt", ["1 Q0 2 1"])
    with pytest.raises(ConfigError) as e:
        load_dataset(files.queries, qrels_evidence=other)
    assert str(e.value).startswith(f"qrels_evidence {other} names none of the 6 questions (its query ids: '1', ...; the questions': ")
    with pytest.raises(ConfigError, match=re.escape("qrels_gold expects the path of a TREC qrels file (e.g. topics-qrels/qrel_golds.txt) "
                                                    "or a mapping of query ids to doc ids, got int 3.")):
        load_dataset(files.queries, qrels_gold=3)
    with pytest.raises(ConfigError, match=re.escape(
            f"The QA file {str(files.queries)!r} does not take the option(s) qrels; expected only qrels_evidence, qrels_gold.")):
        load_dataset(files.queries, qrels=other)
    with pytest.raises(ConfigError, match=re.escape(
            "The dataset 'synthwiki' does not take the option(s) qrels_evidence: qrels set the evidence and gold doc ids of a "
            "QA file's questions")):
        load_dataset("synthwiki", qrels_evidence=other)
    with pytest.raises(DataFileNotFoundError, match="No such qrels file"):
        load_dataset(files.queries, qrels_evidence=tmp_path / "nowhere.txt")


# ------------------------------------------------------------------------------------- envs


def test_an_env_opens_the_files_by_path_and_a_search_finds_the_evidence(files):
    import gymnasium as gym

    env = gym.make("searchgym/SearchR1-v0", corpus=str(files.corpus), dataset=str(files.queries), top_k=SEARCH_K,
                   dataset_options={"qrels_evidence": str(files.qrels_evidence), "qrels_gold": str(files.qrels_gold)})
    obs, info = env.reset(seed=0)
    example = env.unwrapped.example
    assert example.question in obs and example.metadata["source"] == "browsecomp-plus"
    assert example.metadata["evidence_ids"] == sorted(example.metadata["evidence_ids"])  # from the qrels
    city = re.search(r"born in (\w+) in", example.question).group(1)
    _obs, _reward, _terminated, _truncated, info = env.step(f"<search> {city} born founder </search>")
    assert set(info["retrieved_ids"]) & set(example.metadata["evidence_ids"])
    _obs, reward, terminated, _truncated, _info = env.step(f"<answer> {example.answers[0]} </answer>")
    assert terminated and reward == 1.0
    env.close()


def test_the_official_tool_numbers():
    assert (SEARCH_K, SNIPPET_TOKENS) == (5, 512)
