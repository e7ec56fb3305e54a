import gzip
import json
import os
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchgym.corpora.datasets import QA_LINE_FORMAT, read_qa
from searchgym.corpora.mapped import open_corpus, read_passages
from searchgym.corpora.registry import load_corpus, load_dataset
from searchgym.corpora.store import (
    MAX_JSON_DEPTH,
    PASSAGE_LINE_FORMAT,
    chunk_documents,
    parquet_hint,
    split_contents,
    split_sentences,
    write_passages,
)
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- reading


def test_reads_flashrag_contents_with_and_without_quotes(tmp_path):
    path = write_lines(
        tmp_path / "wiki.jsonl",
        [
            json.dumps({"id": "0", "contents": '"Aaron"\nAaron is a prophet.'}),
            json.dumps({"id": "1", "contents": "Abba\nABBA is a band.\nFrom Sweden."}),
            json.dumps({"id": 2, "contents": "no title here"}),
        ],
    )
    corpus = read_passages(path)
    assert isinstance(corpus, Corpus)
    assert corpus.name == "wiki"
    assert list(corpus) == [
        Passage("0", "Aaron", "Aaron is a prophet."),
        Passage("1", "Abba", "ABBA is a band.\nFrom Sweden."),
        Passage("2", "", "no title here"),
    ]


def test_reads_title_text_and_mixed_layouts_skipping_blank_lines(tmp_path):
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [
            json.dumps({"id": "a", "title": "Alpha", "text": "First.", "extra": 1}),
            "",
            "   ",
            json.dumps({"id": "b", "contents": '"Beta"\nSecond.'}),
        ],
    )
    corpus = read_passages(path, name="mine")
    assert corpus.name == "mine"
    assert [(p.id, p.title, p.text) for p in corpus] == [("a", "Alpha", "First."), ("b", "Beta", "Second.")]


def test_reads_gzip_whatever_the_suffix(tmp_path):
    record = json.dumps({"id": "0", "contents": '"T"\nbody'}) + "\n"
    for name in ("c.jsonl.gz", "c2.jsonl"):
        with gzip.open(tmp_path / name, "wt", encoding="utf-8") as f:
            f.write(record)
        assert list(read_passages(tmp_path / name)) == [Passage("0", "T", "body")]
    assert read_passages(tmp_path / "c.jsonl.gz").name == "c"


def test_split_contents_strips_one_pair_of_quotes_only():
    assert split_contents('""Quoted""\ntext') == ('"Quoted"', "text")
    assert split_contents('"\ntext') == ('"', "text")


def test_bad_json_line_names_file_line_and_expected_format(tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", [json.dumps({"id": "0", "contents": "T\nx"}), "", "{not json"])
    message = (
        f"{path}, line 3: expected {PASSAGE_LINE_FORMAT}, got invalid JSON "
        "(Expecting property name enclosed in double quotes at column 2): '{not json'."
    )
    with pytest.raises(DataFormatError, match=re.escape(message)) as info:
        read_passages(path)
    assert (info.value.path, info.value.line) == (str(path), 3)


def test_a_line_that_is_not_an_object(tmp_path):
    path = write_lines(tmp_path / "list.jsonl", ['["0", "text"]'])
    message = f'{path}, line 1: expected {PASSAGE_LINE_FORMAT}, got list ["0", "text"].'
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_passages(path)


def test_missing_fields_list_the_keys_found(tmp_path):
    path = write_lines(tmp_path / "p.jsonl", [json.dumps({"id": "0", "body": "x", "name": "y"})])
    message = f"{path}, line 1: expected {PASSAGE_LINE_FORMAT}, got an object with keys ['id', 'body', 'name']."
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_passages(path)


def test_missing_or_bad_id_and_bad_field_types(tmp_path):
    cases = {
        json.dumps({"contents": "T\nx"}): "got an object with keys ['contents'] (no 'id').",
        json.dumps({"id": None, "contents": "T\nx"}): "got 'id' = NoneType null.",
        json.dumps({"id": "0", "contents": 5}): "got 'contents' = int 5.",
        json.dumps({"id": "0", "title": "T", "text": ["x"]}): "got 'text' = list [\"x\"].",
    }
    for line, got in cases.items():
        path = write_lines(tmp_path / "p.jsonl", [line])
        with pytest.raises(DataFormatError, match=re.escape(f"{path}, line 1: expected {PASSAGE_LINE_FORMAT}, {got}")):
            read_passages(path)


def test_duplicate_ids_name_both_lines(tmp_path):
    path = write_lines(
        tmp_path / "dup.jsonl",
        [json.dumps({"id": i, "contents": f"{t}\n{t}"}) for i, t in (("7", "A"), ("8", "B"), (7, "C"))],
    )
    message = f"{path}, line 3: expected unique passage ids, got id '7' again (first on line 1); rename or drop one."
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_passages(path)


def test_non_utf8_line(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"id": "0", "contents": "T\\nx"}\n{"id": "1", "contents": "caf\xe9"}\n')
    message = f"{path}, line 2: expected {PASSAGE_LINE_FORMAT}, got bytes that are not UTF-8 at column 29."
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_passages(path)


def test_a_byte_order_mark_is_read_and_a_lone_surrogate_is_refused(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "0", "contents": "T\\nx"}\n{"id": "1", "contents": "U\\n\\ud83d\\ude80 rocket"}\n')
    assert [p.text for p in read_passages(path)] == ["x", "\U0001f680 rocket"]  # a surrogate pair is one character
    path = tmp_path / "lone.jsonl"
    path.write_text('{"id": "0", "contents": "T\\nx"}\n{"id": "1", "contents": "U\\nbad \\ud800 text"}\n', encoding="utf-8")
    message = f"{path}, line 2: expected {PASSAGE_LINE_FORMAT}, got a lone UTF-16 surrogate escape"
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_passages(path)
    # A corpus built in Python with one still has a fingerprint (its caches' key).
    assert len(Corpus([Passage("0", "T", "bad \ud800")]).fingerprint) == 16


def test_missing_file_is_a_file_not_found_error_naming_the_path(tmp_path):
    path = tmp_path / "nowhere.jsonl"
    message = f"No such passage file: {str(path)!r}; expected an existing .jsonl or .jsonl.gz file."
    with pytest.raises(FileNotFoundError, match=re.escape(message)):
        read_passages(path)


# --------------------------------------------------------------------------- writing


PASSAGES = [
    Passage("0", "Aaron", "Aaron is a prophet.\nSecond line."),
    Passage("1", 'Title with "quotes"', "Text with ünïcode."),
    Passage("2", "", "untitled"),
]


@pytest.mark.parametrize("fmt", ["flashrag", "title_text"])
@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz"])
def test_write_then_read_round_trips(tmp_path, fmt, name):
    path = write_passages(Corpus(PASSAGES), tmp_path / "sub" / name, format=fmt)
    assert list(read_passages(path)) == PASSAGES


def test_write_flashrag_layout_is_what_search_r1_indexes(tmp_path):
    path = write_passages(PASSAGES[:1], tmp_path / "o.jsonl")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record == {"id": "0", "contents": '"Aaron"\nAaron is a prophet.\nSecond line.'}


def test_write_rejects_unknown_format(tmp_path):
    message = "write_passages expects format to be one of ('flashrag', 'title_text'), got 'csv'."
    with pytest.raises(ConfigError, match=re.escape(message)):
        write_passages(PASSAGES, tmp_path / "o.jsonl", format="csv")


# -------------------------------------------------------------------------- chunking


def sentence(n_words, first="Word", last="end."):
    return " ".join([first] + ["w"] * (n_words - 2) + [last])


def test_short_documents_are_kept_whole_with_their_text_unchanged():
    text = "One sentence.  Two\nsentences."
    assert chunk_documents([("d", "Doc", text)], words=10) == [Passage("d#0", "Doc", text)]


def test_packs_whole_sentences_up_to_the_word_limit():
    s1, s2, s3 = sentence(40, "Alpha"), sentence(50, "Beta"), sentence(30, "Gamma")
    passages = chunk_documents([("doc", "Title", f"{s1} {s2}\n{s3}")], words=100)
    assert passages == [Passage("doc#0", "Title", f"{s1} {s2}"), Passage("doc#1", "Title", s3)]


def test_a_sentence_longer_than_the_limit_is_cut_between_words():
    words = [f"W{i}" for i in range(25)]
    text = "Short one. " + " ".join(words) + "."
    passages = chunk_documents([("x", "T", text)], words=10)
    assert [p.text for p in passages] == [
        "Short one.",
        " ".join(words[:10]),
        " ".join(words[10:20]),
        " ".join(words[20:]) + ".",
    ]
    assert [p.id for p in passages] == ["x#0", "x#1", "x#2", "x#3"]
    assert all(p.title == "T" for p in passages)


def test_chunks_never_exceed_the_limit_and_keep_every_word_in_order():
    text = " ".join(f"Sentence {i} has {'some ' * (i % 7)}words." for i in range(60))
    passages = chunk_documents([Passage("p", "T", text)], words=23)
    assert all(len(p.text.split()) <= 23 for p in passages)
    assert " ".join(p.text for p in passages).split() == text.split()
    assert all(p.text.endswith(".") for p in passages)


def test_overlap_repeats_whole_trailing_sentences():
    a, b, c, d = (sentence(4, name) for name in ("Aa", "Bb", "Cc", "Dd"))
    passages = chunk_documents([("d", "T", f"{a} {b} {c} {d}")], words=8, overlap=4)
    assert [p.text for p in passages] == [f"{a} {b}", f"{b} {c}", f"{c} {d}"]


def test_initials_and_abbreviations_do_not_end_sentences():
    text = "It was written by Arthur C. Clarke in 1968. Dr. Smith agreed. The end."
    assert [" ".join(s) for s in split_sentences(text)] == [
        "It was written by Arthur C. Clarke in 1968.",
        "Dr. Smith agreed.",
        "The end.",
    ]


def test_empty_documents_produce_nothing_and_ids_must_be_unique():
    assert chunk_documents([("e", "Empty", "  \n")]) == []
    with pytest.raises(ConfigError, match=re.escape("chunk_documents got document id 'a' twice; expected unique ids.")):
        chunk_documents([("a", "T", "x"), ("a", "T", "y")])


@pytest.mark.parametrize(
    ("words", "overlap", "message"),
    [
        (0, 0, "chunk_documents expects words to be a positive integer, got 0."),
        (10, 10, "chunk_documents expects overlap to be an integer in [0, words=10), got 10."),
        (10, -1, "chunk_documents expects overlap to be an integer in [0, words=10), got -1."),
    ],
)
def test_chunk_arguments_are_checked(words, overlap, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        chunk_documents([("a", "T", "x")], words=words, overlap=overlap)


# --------------------------------------------------------------------------- hostile files (issue 36)

GOOD_PASSAGE = json.dumps({"id": "first", "contents": "T\nx"})
GOOD_QUESTION = json.dumps({"id": "first", "question": "Q?", "golden_answers": ["Ann"]})
DIGITS = sys.get_int_max_str_digits()

# (line 2 of the file, what the error says was got); the same for passage and QA files.
HOSTILE_LINES = [
    ("[" * 100_000 + "]" * 100_000, f"JSON nested more than {MAX_JSON_DEPTH} levels deep"),  # past Python's recursion limit
    ('{"id": "x", "m": ' + "[" * 500 + "]" * 500 + "}", f"JSON nested more than {MAX_JSON_DEPTH} levels deep"),  # parses, too deep to use
    ('{"id": "x", "m": ' + '{"a": ' * 101 + "1" + "}" * 101 + "}", f"JSON nested more than {MAX_JSON_DEPTH} levels deep"),
    ('{"id": ' + "7" * (DIGITS + 1) + "}", f"an integer of more than {DIGITS} digits"),
    ('{"id": "x", "golden_answers": [' + "9" * 100_000 + "]}", f"an integer of more than {DIGITS} digits"),
    ('{"id": "x", "contents": "a\x00b\x1fc"}', "invalid JSON (Invalid control character at column 27): '{\"id\": \"x\", \"contents\": \"a\\x00b\\x1fc\"}'"),
    ('{"id": "x"', "invalid JSON (Expecting ',' delimiter at column 11): '{\"id\": \"x\"'"),
]


@pytest.mark.parametrize("line, got", HOSTILE_LINES, ids=[f"hostile-{i}" for i in range(len(HOSTILE_LINES))])
@pytest.mark.parametrize("reader, good, expected", [(read_passages, GOOD_PASSAGE, PASSAGE_LINE_FORMAT), (read_qa, GOOD_QUESTION, QA_LINE_FORMAT)],
                         ids=["passages", "qa"])
def test_a_hostile_line_is_a_data_format_error_naming_file_and_line(tmp_path, reader, good, expected, line, got):
    path = write_lines(tmp_path / "hostile.jsonl", [good, line])
    with pytest.raises(DataFormatError) as e:
        reader(path)
    assert str(e.value) == f"{path}, line 2: expected {expected}, got {got}."
    assert (e.value.path, e.value.line) == (str(path), 2)


def test_nesting_up_to_the_limit_is_read(tmp_path):
    deep = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    path = write_lines(tmp_path / "deep.jsonl", [json.dumps({"id": "q", "question": "Q?", "golden_answers": "Ann"})[:-1] + f', "m": {deep}}}'])
    assert read_qa(path)[0].metadata["m"] == json.loads(deep)


# Lines an adversary might write: random bytes, random JSON values, records of the right
# shape with hostile values, and deep or long numbers.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
records = st.fixed_dictionaries(
    {}, optional={key: json_values for key in ("id", "contents", "title", "text", "question", "golden_answers", "metadata")}
)
hostile_lines = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")),
    json_values.map(lambda v: json.dumps(v).encode()),
    records.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.integers(1, 3000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.integers(1, 3 * DIGITS).map(lambda n: b'{"id": ' + b"1" * n + b', "question": "q", "golden_answers": "a"}'),
    st.text(max_size=50).map(lambda t: t.replace("\n", " ").encode("utf-8", "surrogatepass")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(line=hostile_lines, gzipped=st.booleans())
def test_any_line_reads_or_is_a_data_format_error_naming_its_line(tmp_path_factory, line, gzipped):
    folder = tmp_path_factory.mktemp("hostile")
    for reader, good in ((read_passages, GOOD_PASSAGE), (read_qa, GOOD_QUESTION)):
        data = good.encode() + b"\n" + line + b"\n" + good.replace('"first"', '"last"').encode() + b"\n"
        path = folder / f"{reader.__name__}.jsonl"
        path.write_bytes(gzip.compress(data, mtime=0) if gzipped else data)
        try:
            reader(path)
        except DataFormatError as e:
            # The hostile line, or the line after it when it took that line's id first.
            assert e.line in (2, 3) and str(e).startswith(f"{path}, line {e.line}: expected ")


def test_a_directory_is_named_as_one_with_the_files_inside(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    expected = "expected a JSON-lines passage file (one JSON object per line, plain or gzip-compressed)"
    with pytest.raises(DataFormatError) as e:
        read_passages(folder)
    assert str(e.value) == f"{folder}: {expected}, got a directory; pass the .jsonl or .jsonl.gz file itself."
    write_lines(folder / "wiki.jsonl", [GOOD_PASSAGE])
    for load in (read_passages, load_corpus, open_corpus):
        with pytest.raises(DataFormatError) as e:
            load(folder)
        assert str(e.value) == f"{folder}: {expected}, got a directory; pass one of the JSON-lines files in it ({folder / 'wiki.jsonl'})."
    with pytest.raises(DataFormatError, match=r"expected a JSON-lines QA dataset file .*, got a directory; pass one of the JSON-lines files in it \(.*wiki\.jsonl\)\.$"):
        load_dataset(str(folder))


def test_a_folder_given_as_the_data_suggests_the_users_files_never_searchgyms_own(tmp_path, monkeypatch):
    """A folder holding corpus.jsonl and qa.jsonl, whose corpus was opened once (so that
    searchgym's hidden lock and store files lie beside it): the corpus error names
    corpus.jsonl first, the dataset error qa.jsonl first, neither a hidden file; the
    checks made before any model loads (a bench's) say the same."""
    from searchgym.corpora.registry import check_data_name

    folder = tmp_path / "data"
    folder.mkdir()
    write_lines(folder / "corpus.jsonl", [GOOD_PASSAGE])
    write_lines(folder / "qa.jsonl", [json.dumps({"id": "q1", "question": "Q?", "golden_answers": ["x"]})])
    assert len(load_corpus(folder / "corpus.jsonl")) == 1
    hidden = sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
    assert any(name.endswith(".searchgym.lock") for name in hidden), hidden  # what used to be suggested
    corpus_hint = f"pass one of the JSON-lines files in it ({folder / 'corpus.jsonl'}, {folder / 'qa.jsonl'})."
    qa_hint = f"pass one of the JSON-lines files in it ({folder / 'qa.jsonl'}, {folder / 'corpus.jsonl'})."
    for check, hint in ((lambda: load_corpus(folder), corpus_hint), (lambda: check_data_name("corpus", str(folder)), corpus_hint),
                        (lambda: load_dataset(str(folder)), qa_hint), (lambda: check_data_name("dataset", str(folder)), qa_hint)):
        with pytest.raises(DataFormatError) as e:
            check()
        assert str(e.value).endswith(f"got a directory; {hint}") and "/." not in str(e.value), str(e.value)
    monkeypatch.chdir(tmp_path)  # a bare folder name is the folder too, not an unknown built-in name
    with pytest.raises(DataFormatError, match=re.escape(corpus_hint.replace(str(tmp_path) + "/", ""))):
        check_data_name("corpus", "data")


def test_a_named_pipe_is_refused_without_reading_it(tmp_path):
    pipe = tmp_path / "stream.jsonl"
    os.mkfifo(pipe)  # nothing ever writes to it: opening it for reading would block forever
    got = "a named pipe (FIFO), which can be read only once; save what it sends to a regular file and pass that"
    for load, what in ((read_passages, "passage"), (open_corpus, "passage"), (load_corpus, "passage"), (read_qa, "QA dataset"), (load_dataset, "QA dataset")):
        with pytest.raises(DataFormatError) as e:
            load(pipe)
        assert str(e.value) == f"{pipe}: expected a JSON-lines {what} file (one JSON object per line, plain or gzip-compressed), got {got}."


def test_a_missing_file_on_a_path_through_a_file_is_not_found(tmp_path):
    path = write_lines(tmp_path / "a.jsonl", [GOOD_PASSAGE]) / "b.jsonl"
    with pytest.raises(DataFileNotFoundError, match=re.escape(f"No such passage file: {str(path)!r}")):
        read_passages(path)


OTHER_KINDS = [
    (b"PAR1\x15\x04" + bytes(50), "a Parquet file; export it as JSON lines (pandas: df.to_json(path, orient='records', lines=True))"),
    (b"PK\x03\x04" + bytes(50), "a zip archive; unpack it and pass the .jsonl file inside"),
    (b"BZh91AY&SY" + bytes(50), "a bzip2-compressed file; decompress it or recompress it with gzip"),
    (b"\x93NUMPY\x01\x00" + bytes(50), "a NumPy array file"),
    ("\ufeff" + GOOD_PASSAGE, "UTF-16 text (little-endian byte-order mark); save it as UTF-8"),
    (bytes(257) + b"ustar\x0000" + bytes(250), "a tar archive; unpack it and pass the .jsonl file inside"),
    (b'[\n  {"id": "0", "contents": "x"}\n]\n', "a JSON array (one document, not one object per line); convert it with: jq -c '.[]' data.jsonl > data-lines.jsonl"),
    (b'[{"id": "0", "contents": "x"}, {"id": "1", "contents": "y"}]\n', "a JSON array (one document, not one object per line); convert it with: jq -c '.[]' data.jsonl > data-lines.jsonl"),
    (b'{\n  "id": "0",\n  "contents": "x"\n}\n', "a JSON document spread over several lines (its first line is '{'); convert it with: jq -c . data.jsonl > data-lines.jsonl"),
]


@pytest.mark.parametrize("content, got", OTHER_KINDS, ids=[f"kind-{i}" for i in range(len(OTHER_KINDS))])
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_file_of_another_kind_is_named_as_what_it_is(tmp_path, content, got, gzipped):
    data = content.encode("utf-16-le") if isinstance(content, str) else content
    path = tmp_path / "data.jsonl"
    path.write_bytes(gzip.compress(data) if gzipped else data)
    for reader, what in ((read_passages, "passage"), (read_qa, "QA dataset")):
        with pytest.raises(DataFormatError) as e:
            reader(path)
        if what == "QA dataset" and got.startswith("a Parquet file"):  # Search-R1's QA parquet has a converter
            got = parquet_hint(path, what)
        assert str(e.value) == f"{path}: expected a JSON-lines {what} file (one JSON object per line, plain or gzip-compressed), got {got}."


def test_a_damaged_gzip_stream_is_a_data_format_error(tmp_path):
    data = bytearray(gzip.compress("".join(json.dumps({"id": str(i), "contents": f"T\nword {i} " * 20}) + "\n" for i in range(200)).encode(), mtime=0))
    data[10:18] = b"\xff" * 8  # the first deflate block: a block type that does not exist (zlib.error)
    path = tmp_path / "damaged.jsonl.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}: expected a complete gzip file, got a damaged one \("):
        read_passages(path)
