"""A user's own data given the wrong way: each error says how to go on."""

import re
import subprocess
import sys

import pytest

from searchgym.corpora.registry import CORPORA, DATASETS, check_data_name, load_corpus, load_dataset
from searchgym.error import DataFileNotFoundError, DataFormatError


def test_a_missing_path_names_the_built_in_names_that_could_stand_in_its_place(tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    for load, kind, names in ((load_corpus, "corpus", CORPORA), (load_dataset, "dataset", DATASETS)):
        what = "passage" if kind == "corpus" else "QA dataset"
        for check in (lambda: load(missing), lambda: check_data_name(kind, str(missing))):
            with pytest.raises(DataFileNotFoundError) as e:
                check()
            assert str(e.value) == (
                f"[Errno 2] No such {what} file: {str(missing)!r}; expected an existing .jsonl or .jsonl.gz file. "
                f"Check the path, or pass a built-in {kind} name instead ({', '.join(names)})."  # the path once (issue 63)
            )
    assert CORPORA == ("wiki-vital", "synthwiki", "deepwiki") and DATASETS == ("wiki-vital", "wiki-vital-answerable", "synthwiki", "deepwiki")


def test_a_folder_of_text_files_gets_the_command_that_makes_its_corpus_and_the_command_works(tmp_path):
    folder = tmp_path / "my docs"  # a space: the command quotes the paths
    folder.mkdir()
    (folder / "Paris.txt").write_text("Paris is the capital of France.\n", encoding="utf-8")
    (folder / "Berlin.txt").write_text("Berlin is the capital of Germany.", encoding="utf-8")
    (folder / "notes.md").write_text("not a passage", encoding="utf-8")
    with pytest.raises(DataFormatError) as e:
        load_corpus(folder)
    message = str(e.value)
    assert message.startswith(
        f"{folder}: expected a JSON-lines passage file (one JSON object per line, plain or gzip-compressed), got a directory "
        "of 2 .txt files; a corpus is one JSON-lines file, one passage per line"
    )
    target = tmp_path / "my docs.jsonl"
    assert message.endswith(f"` and pass {target}.")
    command = re.search(r"`(python -c .*)`", message).group(1)
    # The command as a user pastes it into a POSIX shell, with this interpreter as `python`.
    subprocess.run(command.replace("python -c", f"{sys.executable} -c", 1), shell=True, check=True, cwd=tmp_path, timeout=60)
    corpus = load_corpus(target)
    passages = sorted((p.id, p.title, p.text) for p in corpus)
    assert passages == [("Berlin", "Berlin", "Berlin is the capital of Germany."), ("Paris", "Paris", "Paris is the capital of France.")]
    # A dataset is told the line a question takes.
    with pytest.raises(DataFormatError, match=re.escape(
            'got a directory of 2 .txt files; a QA dataset is one JSON-lines file, one question per line: '
            '{"id": "q1", "question": "...", "golden_answers": ["..."]}.')):
        load_dataset(str(folder))
