"""Passage files opened, not loaded: the memory-mapped store behaves as an in-memory Corpus."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tracemalloc

import pytest

from searchgym.corpora import load_corpus
from searchgym.corpora.mapped import MappedCorpus, open_corpus, store_folder
from searchgym.corpora.mapped import read_passages
from searchgym.corpora.store import write_passages
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import DataFormatError

PASSAGES = [
    Passage("0", "Aaron", "Aaron is a prophet."),
    Passage("1", "Abba", "ABBA is a band.\nFrom Sweden."),
    Passage("2", "", "no title here"),
    Passage("3", "Café", "Crème brûlée, 1901 — ünïcödé ✓"),
]
NAMED = [Passage("doc-b", "B", "bee"), Passage("doc-a", "A", "ay"), Passage("x", "X", "ex")]


@pytest.fixture(params=["positional", "hashed"])
def pair(request, tmp_path):
    """(in-memory Corpus, the same passages opened from a file)."""
    passages = PASSAGES if request.param == "positional" else NAMED
    memory = Corpus(passages, name="c")
    return memory, read_passages(write_passages(memory, tmp_path / "c.jsonl"))


def test_answers_as_the_in_memory_corpus(pair):
    memory, mapped = pair
    assert isinstance(mapped, MappedCorpus) and isinstance(mapped, Corpus)
    assert len(mapped) == len(memory) and mapped.name == "c"
    assert list(mapped) == list(memory)
    assert [mapped[i] for i in range(-len(memory), len(memory))] == [memory[i] for i in range(-len(memory), len(memory))]
    assert mapped[1:] == memory[1:] and mapped[::-2] == memory[::-2]
    for p in memory:
        assert mapped.get(p.id) == p and mapped.index_of(p.id) == memory.index_of(p.id)
        assert p.id in mapped and p in mapped
    assert mapped.fingerprint == memory.fingerprint


def test_misses_and_bad_indices(pair):
    memory, mapped = pair
    for missing in ("nope", "07", " 1", "4", "-1", ""):
        assert missing not in mapped
        with pytest.raises(KeyError, match=f"No passage with id {missing!r} in corpus 'c'"):
            mapped.get(missing)
    assert Passage(memory[0].id, memory[0].title, "changed") not in mapped
    with pytest.raises(IndexError, match=f"passage index {len(memory)} out of range for corpus 'c' of {len(memory)} passages"):
        mapped[len(memory)]
    with pytest.raises(TypeError, match="Corpus indices must be integers or slices, not str"):
        mapped["0"]


def test_the_store_is_built_once_beside_the_file_and_shared(tmp_path):
    path = write_passages(PASSAGES, tmp_path / "wiki.jsonl")
    first = read_passages(path)
    folder = store_folder(path)
    assert folder == tmp_path / "wiki.jsonl.searchgym" and (folder / "meta.json").is_file()
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["passages"] == 4 and meta["ids"] == "positional" and meta["fingerprint"] == first.fingerprint
    built = (folder / "blob.bin").stat().st_mtime_ns
    again = load_corpus(str(path), name="other")
    assert again._store is first._store and again.name == "other"
    # A new process maps the store instead of building it.
    code = f"from searchgym.corpora import load_corpus; c = load_corpus({str(path)!r}); print(len(c), c[3].title)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["4", "Café"]
    assert (folder / "blob.bin").stat().st_mtime_ns == built


def test_a_changed_file_is_read_again(tmp_path):
    path = write_passages(PASSAGES, tmp_path / "wiki.jsonl")
    assert read_passages(path)[0].text == "Aaron is a prophet."
    changed = [Passage("0", "Aaron", "Aaron is a priest.!"), *PASSAGES[1:]]  # same size, same first bytes
    write_passages(changed, path)
    assert read_passages(path)[0].text == "Aaron is a priest.!"
    assert read_passages(path).fingerprint == Corpus(changed).fingerprint


def test_an_unwritable_folder_keeps_the_store_in_the_cache(tmp_path, monkeypatch):
    path = write_passages(PASSAGES, tmp_path / "data" / "wiki.jsonl")
    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path / "cache"))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(path.parent) else real_access(p, mode))
    folder = store_folder(path)
    assert folder.parent == tmp_path / "cache" / "corpora" and folder.name.startswith("wiki.jsonl-")
    assert list(open_corpus(path)) == PASSAGES and (folder / "meta.json").is_file()


def test_pickles_as_its_path(pair):
    _, mapped = pair
    data = pickle.dumps(mapped)
    assert len(data) < 300
    back = pickle.loads(data)
    assert list(back) == list(mapped) and back.name == mapped.name and back.fingerprint == mapped.fingerprint


def test_repeated_id_and_bad_lines_are_reported_as_before(tmp_path):
    lines = [json.dumps({"id": "a", "contents": "x"}), json.dumps({"id": "b", "contents": "y"}), json.dumps({"id": "a", "contents": "z"})]
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as e:
        read_passages(path)
    assert str(e.value) == f"{path}, line 3: expected unique passage ids, got id 'a' again (first on line 1); rename or drop one."
    assert not store_folder(path).exists()  # nothing half-built is left
    path.write_text(lines[0] + "\n{oops\n")
    with pytest.raises(DataFormatError, match=r"line 2: expected .*invalid JSON"):
        read_passages(path)


def test_holds_almost_nothing_per_passage(tmp_path):
    passages = [Passage(str(i), f"Title {i // 3}", f"passage number {i} " + "word " * 60) for i in range(20_000)]
    path = write_passages(passages, tmp_path / "big.jsonl")
    read_passages(path)  # builds the store
    from searchgym.corpora import mapped as module

    module._STORES.clear()
    tracemalloc.start()
    corpus = read_passages(path)
    assert corpus[12_345].title == "Title 4115" and corpus.get("19999").id == "19999"
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert size / len(corpus) < 5, size  # bytes of Python objects per passage (the target is 100)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    corpus = read_passages(path)
    assert len(corpus) == 0 and list(corpus) == [] and "0" not in corpus
