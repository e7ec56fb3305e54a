"""The BM25 posting matrix: built in shards on several processes, saved and mapped from disk.

A BM25 index is a (term x passage) score matrix in compressed sparse rows: for term ``t``,
``indices[indptr[t]:indptr[t+1]]`` are the passages containing it (ascending) and ``data`` the
same slice of their precomputed scores, with bm25s's own idf and tf formulas. A query adds the
rows of its terms (see :class:`~searchgym.corpora.bm25.BM25Retriever`).

**Building in bounded memory.** :func:`build_postings` cuts the corpus into shards of
``shard_size`` passages. Each shard is tokenized on its own (in ``workers`` processes at once;
a memory-mapped corpus is passed by its path, so nothing is copied) into the shard's term ids,
passage lengths and (term, passage, tf) postings, written to a scratch folder. The parent then
gives every term its global id (in order of first occurrence in the corpus, as one pass would),
adds up document frequencies and lengths, and scatters each shard's scores into the final
arrays: memory-mapped files of the index folder when ``out`` is given. No step holds more than
one shard's tokens; the scores are the same float32 values a single pass computes.

**On disk** (:func:`save_postings` / :func:`load_postings`): ``data.npy`` (float32),
``indices.npy`` (int32), ``indptr.npy`` (int64), ``nonoccurrence.npy`` (BM25L / BM25+ only),
``term_max.npy`` (float32, each term's largest score: the bounds dynamic pruning reads,
:mod:`searchgym.corpora.pruning`; indexes written before it lack it and are scored
exhaustively), the block maxima the compiled engine reads (:func:`~searchgym.corpora.pruning.block_maxima`
at :data:`~searchgym.corpora.pruning.BLOCK` postings a block, the size recorded as ``block_size``:
``block_ptr.npy`` int64, ``block_max.npy`` float32, ``block_last.npy`` int32; indexes written
before them compute them when first searched) and the vocabulary as sorted 64-bit hashes of the
terms with their ids (``vocab_hash.npy``, ``vocab_ids.npy``), so that loading maps every array and builds no Python object per term.
Every file's size and checksum are computed as it is written (the score arrays' as the
shards are scattered into them: :mod:`searchgym.corpora.checksum`) and recorded in the
index's metadata; :func:`check_postings` compares sizes, dtypes and shapes on every load.
"""

from __future__ import annotations

import itertools
import os
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.corpora.building import SPACE_ERRNOS, folder_bytes
from searchgym.corpora.checksum import MappedNpy, add_scattered, check_files, check_npy, file_checksum, save_npy, write_bytes
from searchgym.corpora.mapped import stable_hash
from searchgym.corpora.pruning import BLOCK, block_maxima, term_maxima
from searchgym.corpora.tokenize import default_analyzer
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import SearchGymError, require

__all__ = ["BLOCK_FILES", "HashedVocab", "Postings", "build_postings", "check_postings", "load_postings", "save_postings"]

# What a worker process runs: ROOT FILE PREFIX_DIR PARENT_PID START:COUNT ... (ROOT: the folder
# holding this searchgym). It dies with its parent (Linux), tokenizes its shards one after the
# other and prints each one's START when done; an OSError is reported as a last line
# "OSError [ERRNO, FILE, MESSAGE]" (a full disk is then named as such by the parent).
_WORKER = (
    "import os, sys; sys.path.insert(0, sys.argv[1])\n"
    "try:\n"
    "    import ctypes; ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL when the parent dies\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[4]): sys.exit(1)  # the parent died before the line above\n"
    "from searchgym.corpora.mapped import open_corpus\n"
    "from searchgym.corpora.postings import tokenize_shard\n"
    "corpus = open_corpus(sys.argv[2])\n"
    "try:\n"
    "    for shard in sys.argv[5:]:\n"
    "        start, count = map(int, shard.split(':'))\n"
    "        tokenize_shard(corpus, start, count, f'{sys.argv[3]}/{start}')\n"
    "        print(start, flush=True)\n"
    "except OSError as e:\n"
    "    import json; print('OSError', json.dumps([e.errno, e.filename, e.strerror or str(e)]), file=sys.stderr)\n"
    "    sys.exit(1)"
)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

#: Terms a :class:`HashedVocab` remembers per generation (two generations: at most twice this
#: many, ~120 bytes each, 16 MB at most). A stream of questions keeps coming back to a few
#: thousand words (question words, common nouns); the rest are looked up once or twice.
TERMS_REMEMBERED = 1 << 16

#: The files of the block maxima (``Postings.blocks``, in that order).
BLOCK_FILES = ("block_ptr.npy", "block_max.npy", "block_last.npy")

#: Passages per shard by default: about 0.3 GB of working memory per worker on wiki-18-like text.
DEFAULT_SHARD_SIZE = 100_000


def passage_text(passage: Passage) -> str:
    """The text indexed for a passage: title, newline, text."""
    return f"{passage.title}\n{passage.text}"


@dataclass
class Postings:
    """A BM25 score matrix (see the module docstring) and the vocabulary mapping terms to rows."""

    data: np.ndarray  # [P] float32
    indices: np.ndarray  # [P] int32
    indptr: np.ndarray  # [V + 1] int64
    vocab: Mapping[str, int]
    nonoccurrence: np.ndarray | None  # [V] float32, BM25L / BM25+ only
    num_docs: int
    #: Records (size, checksum, dtype, shape) of the arrays already written to files by the
    #: build (``data.npy``, ``indices.npy``), computed as they were written.
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: [V] float32, each term's largest score (:func:`~searchgym.corpora.pruning.term_maxima`);
    #: None for an index written before these bounds were (scored exhaustively).
    term_max: np.ndarray | None = None
    #: ``(bptr [V+1] int64, bmax [B] float32, blast [B] int32)``: the block maxima of the compiled
    #: engine at ``block_size`` postings a block (:func:`~searchgym.corpora.pruning.block_maxima`),
    #: as written beside the postings; None when not read (the engine computes them).
    blocks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    block_size: int | None = None

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + self.indices.nbytes + self.indptr.nbytes)


class HashedVocab(Mapping[str, int]):
    """A read-only term -> id mapping kept as sorted 64-bit term hashes (memory-mapped).

    Loading it builds nothing per term; a lookup is a binary search, and the terms looked up
    lately are remembered (see :data:`TERMS_REMEMBERED`). The build checks that no two terms of
    the vocabulary share a hash (:func:`save_postings` keeps a plain list otherwise).
    """

    def __init__(self, hashes: np.ndarray, ids: np.ndarray, *, remembered: int | None = None):
        # Plain ndarray views of the mapped files: indexing a np.memmap goes through its Python
        # __getitem__ (about 1 us a read, two reads a lookup).
        self._hashes = hashes.view(np.ndarray)  # [V] uint64, sorted
        self._ids = ids.view(np.ndarray)  # [V] int32, the id of each hash
        self.remembered = TERMS_REMEMBERED if remembered is None else remembered
        # term -> id, or -1 for a term not in the vocabulary. Two generations as the analyzer's
        # stem cache (searchgym.corpora.tokenize): when the newer is full it becomes the older and
        # the oldest goes, so memory stays bounded however many distinct terms are looked up.
        self._recent: dict[str, int] = {}
        self._older: dict[str, int] = {}

    def _search(self, term: str) -> int:
        """The term's id by binary search over the hashes, or -1."""
        h = np.uint64(stable_hash(term))
        i = int(self._hashes.searchsorted(h))
        if i < len(self._hashes) and self._hashes[i] == h:
            return int(self._ids[i])
        return -1

    def get(self, term: str, default: Any = None) -> Any:
        # Remembered: a dict read (0.09 us a term) instead of a blake2b hash, a numpy searchsorted
        # and two array reads (5.0 us; measured on 300k passages, one core; a question of 8-15 words
        # looks up each of its terms, the analyzer asking twice for a word it has not stemmed
        # before). Answers are the binary search's: an entry is only ever its result.
        i = self._recent.get(term)
        if i is None:
            i = self._older.get(term)
            if i is None:
                i = self._search(term)
            if len(self._recent) >= self.remembered:  # replaced, not changed: readers may hold them
                self._older, self._recent = self._recent, {}
            self._recent[term] = i
        return default if i < 0 else i

    def __getitem__(self, term: str) -> int:
        i = self.get(term)
        if i is None:
            raise KeyError(term)
        return i

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __len__(self) -> int:
        return len(self._hashes)

    def __iter__(self) -> Iterator[str]:
        raise TypeError("HashedVocab keeps hashes of its terms, not the terms; it can be looked up but not listed.")


# ------------------------------------------------------------------------------ building


def build_postings(
    corpus: Corpus,
    *,
    k1: float,
    b: float,
    delta: float,
    method: str,
    workers: int = 1,
    shard_size: int = DEFAULT_SHARD_SIZE,
    out: Path | None = None,
    progress: bool = False,
) -> Postings | None:
    """The BM25 postings of ``corpus`` with bm25s's formulas for ``method``, or None when no
    passage has an indexable term. With ``out`` the arrays are written there and mapped."""
    bm25s = require("bm25s", extra="core", feature="The bm25s BM25 backend", install="pip install bm25s")
    scoring = bm25s.scoring
    formulas = bm25s.BM25(k1=k1, b=b, delta=delta, method=method)
    n = len(corpus)
    bounds = [(start, min(start + shard_size, n)) for start in range(0, n, shard_size)]
    with tempfile.TemporaryDirectory(prefix="searchgym-bm25-", dir=out) as scratch:
        try:
            return _score_shards(corpus, bounds, Path(scratch), formulas, scoring, k1=k1, b=b, delta=delta, method=method,
                                 workers=workers, out=out, progress=progress)
        except OSError as e:  # no room: what the build held on disk when it failed, before its scratch files go
            if e.errno in SPACE_ERRNOS and not hasattr(e, "written"):
                e.written = folder_bytes(out if out is not None else Path(scratch))
            raise


def _score_shards(corpus: Corpus, bounds: list[tuple[int, int]], scratch: Path, formulas: Any, scoring: Any, *, k1: float,
                  b: float, delta: float, method: str, workers: int, out: Path | None, progress: bool) -> Postings | None:
    """Tokenize the shards into ``scratch``, then score them into the arrays (see :func:`build_postings`)."""
    n = len(corpus)
    # Global term ids in order of first occurrence, as one pass over the corpus would give:
    # each shard's terms are taken in shard order as soon as they are ready, then dropped.
    vocab: dict[str, int] = {}
    to_global: list[np.ndarray] = []  # per shard: [shard terms] global id of each
    shard_lengths: list[np.ndarray] = []

    def absorb(stems: list[str], lengths: np.ndarray) -> None:
        # A shard's stems are distinct: the new ones take the next ids in their order, all
        # in C-level loops (the parent shares the cores with the workers).
        new = list(itertools.filterfalse(vocab.__contains__, stems))
        vocab.update(zip(new, itertools.count(len(vocab))))
        to_global.append(np.fromiter(map(vocab.__getitem__, stems), np.int32, len(stems)))
        shard_lengths.append(lengths)

    _tokenize_shards(corpus, bounds, scratch, workers, progress, absorb)
    if not vocab:
        return None
    lengths = np.concatenate(shard_lengths)  # [N] int64
    del shard_lengths
    n_vocab = len(vocab)
    df = np.zeros(n_vocab, dtype=np.int64)
    for s, (start, _) in enumerate(bounds):
        df += np.bincount(to_global[s][np.load(scratch / f"{start}.terms.npy")], minlength=n_vocab)

    idf_fn = scoring._select_idf_scorer(formulas.idf_method)
    tfc_fn = scoring._select_tfc_scorer(method)
    # bm25s's scalar idf, called once per distinct document frequency (a few thousand), not per term.
    distinct_df, df_slot = np.unique(df, return_inverse=True)
    idf = np.array([idf_fn(d, N=n) for d in distinct_df.tolist()], dtype=np.float32)[df_slot]  # [V]
    avg_len = lengths.mean()
    nonoccurrence = None
    if method in formulas.methods_requiring_nonoccurrence:
        nonoccurrence = scoring._build_nonoccurrence_array(
            doc_frequencies=dict(enumerate(df.tolist())), n_docs=n, compute_idf_fn=idf_fn, calculate_tfc_fn=tfc_fn,
            l_d=avg_len, l_avg=avg_len, k1=k1, b=b, delta=delta, dtype=formulas.dtype,
        )
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    total = int(indptr[-1])
    data_file = indices_file = None
    if out is None:
        data, indices = np.empty(total, dtype=np.float32), np.empty(total, dtype=np.int32)
    else:  # memory-mapped files, checksummed as the shards are scattered into them
        data_file, indices_file = MappedNpy(out / "data.npy", np.float32, (total,)), MappedNpy(out / "indices.npy", np.int32, (total,))
        data, indices = data_file.array, indices_file.array

    lengths_f = lengths.astype(np.float64)  # [N], what bm25s's tf formulas read
    fill = indptr[:-1].copy()  # [V] where each term's next posting goes
    bar = _bar(progress, len(bounds), "Scoring shards")
    for s, (start, _) in enumerate(bounds):
        terms = np.load(scratch / f"{start}.terms.npy")  # [p] shard term ids, grouped by term
        docs = np.load(scratch / f"{start}.docs.npy") + np.int32(start)  # [p] global passage positions
        tf = np.load(scratch / f"{start}.tf.npy")  # [p] float32
        group = np.flatnonzero(np.concatenate(([True], terms[1:] != terms[:-1])))[: len(terms)]  # first posting of each term
        counts = np.diff(np.append(group, len(terms)))
        rows = to_global[s][terms[group]]  # [g] global id of each group's term
        dest = np.repeat(fill[rows] - group, counts) + np.arange(len(terms))  # [p]
        fill[rows] += counts
        terms = to_global[s][terms]
        tfc = tfc_fn(tf_array=tf, l_d=lengths_f[docs], l_avg=avg_len, k1=k1, b=b, delta=delta)
        scores = idf[terms] * tfc
        if nonoccurrence is not None:
            scores -= nonoccurrence[terms]
        scores = scores.astype(np.float32)  # what data holds
        data[dest] = scores
        indices[dest] = docs
        if data_file is not None:
            add_scattered((data_file.sum, indices_file.sum), data_file.first, dest, scores, docs)
        if bar:
            bar.update()
    if bar:
        bar.close()
    files = {} if data_file is None else {"data.npy": data_file.record(), "indices.npy": indices_file.record()}
    return Postings(data, indices, indptr, vocab, nonoccurrence, n, files, term_maxima(data, indptr))


def _bar(progress: bool, total: int, desc: str) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="shard", file=sys.stderr)


def _tokenize_shards(
    corpus: Corpus, bounds: Sequence[tuple[int, int]], scratch: Path, workers: int, progress: bool,
    absorb: Callable[[list[str], np.ndarray], None],
) -> None:
    """Tokenize every shard, writing its postings to ``scratch`` and handing ``absorb`` its terms
    in order of first occurrence and its passage lengths, shard after shard in corpus order.

    A corpus opened from a file is tokenized by ``workers`` processes (fresh interpreters
    running :func:`tokenize_shard` from this very copy of searchgym, each over every
    ``workers``-th shard: each maps the same passage store, so nothing is copied, and the
    caller's script is never re-imported as multiprocessing's spawn would).
    A corpus held in memory is tokenized here, one shard after the other.
    """
    bar = _bar(progress, len(bounds), f"Tokenizing {len(corpus):,} passages")
    try:
        ready: dict[int, tuple[list[str], np.ndarray]] = {}
        absorbed = 0
        if workers > 1 and len(bounds) > 1 and corpus.path is not None:
            # Each worker keeps its interpreter and stem cache across its shards: shard w, w + W, ...
            count = min(workers, len(bounds))
            shard_of = {start: s for s, (start, _) in enumerate(bounds)}
            running = []
            try:
                for w in range(count):
                    mine = [f"{start}:{stop - start}" for start, stop in bounds[w::count]]
                    log = tempfile.TemporaryFile()
                    command = [sys.executable, "-c", _WORKER, _PACKAGE_ROOT, str(corpus.path), str(scratch), str(os.getpid()), *mine]
                    running.append((subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True), log))
                with selectors.DefaultSelector() as selector:
                    for process, log in running:
                        selector.register(process.stdout, selectors.EVENT_READ, (process, log))
                    while selector.get_map():
                        for key, _ in selector.select():
                            process, log = key.data
                            line = process.stdout.readline()
                            if line:  # a shard is done
                                s = shard_of[int(line)]
                                ready[s] = _read_shard(str(scratch / str(bounds[s][0])))
                                while absorbed in ready:  # in shard order, whatever order the workers end in
                                    absorb(*ready.pop(absorbed))
                                    absorbed += 1
                                if bar:
                                    bar.update()
                                continue
                            selector.unregister(process.stdout)
                            if process.wait() != 0:
                                log.seek(0)
                                lines = log.read().decode(errors="replace").strip().splitlines() or ["no output"]
                                failed = [bounds[s] for s in range(len(bounds)) if s >= absorbed and s not in ready]
                                where = f"{failed[0][0]}-{failed[0][1]}" if failed else "its shards"
                                code, file, message = _reported_oserror(lines[-1])
                                if code in SPACE_ERRNOS:  # no room for the shard's files: the build names it as a full disk
                                    raise OSError(code, f"{message} (tokenizing passages {where} in a worker process)", file)
                                raise SearchGymError(
                                    f"Tokenizing passages {where} of {corpus.path} failed in a worker process "
                                    f"(exit {process.returncode}): {lines[-1]}"
                                )
            finally:
                for process, log in running:
                    if process.poll() is None:
                        process.kill()
                    process.wait()
                    process.stdout.close()
                    log.close()
        else:
            for s, (start, stop) in enumerate(bounds):
                prefix = str(scratch / str(start))
                tokenize_shard(corpus, start, stop - start, prefix)
                absorb(*_read_shard(prefix))
                if bar:
                    bar.update()
    finally:
        if bar:
            bar.close()


def _reported_oserror(line: str) -> tuple[int | None, str | None, str]:
    """``(errno, file, message)`` of a worker's "OSError [...]" line; ``(None, None, line)`` for another line."""
    import json

    if line.startswith("OSError ["):
        try:
            code, file, message = json.loads(line[len("OSError ") :])
            return (code if isinstance(code, int) else None), file, str(message)
        except ValueError:
            pass
    return None, None, line


def tokenize_shard(passages: Sequence[Passage], start: int, count: int, prefix: str) -> None:
    """Tokenize ``passages[start:start+count]`` and write to ``prefix.*``: its postings
    (``terms``, ``docs``, ``tf``: term-major, passages ascending within a term, term ids local
    to the shard), its passage ``lengths`` and its terms in id order (``stems.txt``)."""
    vocab: dict[str, int] = {}
    texts = (passage_text(passages[i]) for i in range(start, start + count))
    terms, lengths = default_analyzer().index_terms(texts, vocab)  # [T] int32, [n] int64
    # One int64 key per token, term-major and passage within a term: sorting the keys (no
    # argsort, no gathers) puts each (term, passage) pair's tokens in one run.
    keys = terms.astype(np.int64)  # [T]
    keys *= max(count, 1)
    keys += np.repeat(np.arange(count, dtype=np.int64), lengths)
    del terms
    keys.sort()
    # Equal keys are now adjacent: each run is one posting, its length the tf.
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    starts = starts[: len(keys)]  # no term at all: no posting
    terms, docs = np.divmod(keys[starts], max(count, 1))
    _save(f"{prefix}.terms.npy", terms.astype(np.int32))
    _save(f"{prefix}.docs.npy", docs.astype(np.int32))
    _save(f"{prefix}.tf.npy", np.diff(np.append(starts, len(keys))).astype(np.float32))
    _save(f"{prefix}.lengths.npy", lengths)
    # Terms are runs of word characters, so a newline never occurs in one.
    Path(f"{prefix}.stems.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8", errors="surrogatepass")


def _save(path: str, array: np.ndarray) -> None:
    """``np.save`` through Python's file writes: a full disk or the file size limit is an OSError
    with its errno (numpy's own writer reports a short write with none), with no copy made."""
    array = np.ascontiguousarray(array)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(array))
        f.write(memoryview(array).cast("B"))


def _read_shard(prefix: str) -> tuple[list[str], np.ndarray]:
    stems = Path(f"{prefix}.stems.txt").read_text(encoding="utf-8", errors="surrogatepass").split("\n")[:-1]
    return stems, np.load(f"{prefix}.lengths.npy")


# ------------------------------------------------------------------------------ disk


def save_postings(postings: Postings, folder: Path) -> dict[str, Any]:
    """Write ``postings`` into ``folder`` (arrays already there, from a build with ``out``, are
    kept); returns what the index's metadata records about them: counts, and under ``"files"``
    the record (size, checksum, dtype, shape) of every file."""
    files: dict[str, dict[str, Any]] = {}
    for name, array in (("data.npy", postings.data), ("indices.npy", postings.indices), ("indptr.npy", postings.indptr)):
        if isinstance(array, np.memmap) and Path(array.filename).resolve() == (folder / name).resolve():
            # written by the build: its record was made while writing (read back only if it was not)
            files[name] = postings.files.get(name) or {
                "bytes": (folder / name).stat().st_size, "checksum": file_checksum(folder / name),
                "dtype": array.dtype.str, "shape": list(array.shape)}
        else:
            files[name] = save_npy(folder / name, np.asarray(array))
    if postings.nonoccurrence is not None:
        files["nonoccurrence.npy"] = save_npy(folder / "nonoccurrence.npy", np.asarray(postings.nonoccurrence))
    # An index loaded without bounds (written before them) gets them when saved again.
    term_max = postings.term_max if postings.term_max is not None else term_maxima(postings.data, postings.indptr)
    files["term_max.npy"] = save_npy(folder / "term_max.npy", np.asarray(term_max, dtype=np.float32))
    # The block maxima, written here so that a search maps them instead of computing them from
    # the whole score array on its first query (0.06 s at 300k passages, 0.45 s at 1M measured,
    # about a second per 100M postings, so ~10 s at 21M estimated) in every process that loads
    # the index, each then holding its own copy: a build pays that once, and every process maps
    # the same pages. The files are 13.1 of the 166.5 MB of a 300k-passage index.
    if postings.blocks is not None and postings.block_size == BLOCK:
        blocks = postings.blocks
    else:
        blocks = block_maxima(postings.data, postings.indices, postings.indptr, BLOCK)
    for name, array in zip(BLOCK_FILES, blocks):
        files[name] = save_npy(folder / name, np.asarray(array))
    vocab = postings.vocab
    if isinstance(vocab, HashedVocab):
        hashes, ids = vocab._hashes, vocab._ids
    else:
        terms = list(vocab)
        hashes = np.fromiter((stable_hash(t) for t in terms), np.uint64, len(terms))
        ids = np.fromiter((vocab[t] for t in terms), np.int32, len(terms))
        order = np.argsort(hashes, kind="stable")
        hashes, ids = hashes[order], ids[order]
        if len(hashes) > 1 and bool((hashes[1:] == hashes[:-1]).any()):  # two terms, one hash: keep the terms
            text = "\n".join(terms) + "\n"
            files["vocab.txt"] = write_bytes(folder / "vocab.txt", text.encode("utf-8", errors="surrogatepass"))
    files["vocab_hash.npy"] = save_npy(folder / "vocab_hash.npy", np.asarray(hashes))
    files["vocab_ids.npy"] = save_npy(folder / "vocab_ids.npy", np.asarray(ids))
    return {"num_docs": postings.num_docs, "num_terms": len(vocab), "num_postings": len(postings.data), "block_size": BLOCK,
            "files": files}


def check_postings(folder: Path, meta: Mapping[str, Any], fix: str) -> None:
    """The cheap check of a folder's postings before they are mapped: the files have the sizes,
    dtypes and shapes the metadata records (folders written before files were recorded: the
    shapes its counts imply, each file whole). Raises :class:`~searchgym.error.DamagedFileError`
    naming the file, what was expected and ``fix``."""
    files = meta.get("files")
    if files:
        check_files(folder, files, fix, recorded_in="searchgym_bm25.json")
        return
    postings, terms = meta.get("num_postings"), meta.get("num_terms")
    arrays = [("data.npy", np.float32, postings), ("indices.npy", np.int32, postings),
              ("indptr.npy", np.int64, None if terms is None else terms + 1)]
    if not (folder / "vocab.txt").is_file():
        arrays += [("vocab_hash.npy", np.uint64, terms), ("vocab_ids.npy", np.int32, terms)]
    for name, dtype, length in arrays:
        check_npy(folder / name, dtype, None if length is None else (length,), fix)


def load_postings(folder: Path, num_docs: int, *, in_memory: bool = False, bounds: bool = True,
                  block_size: int | None = None) -> Postings:
    """Map the postings :func:`save_postings` wrote to ``folder`` (``in_memory``: read the score
    matrix into memory instead; the vocabulary stays mapped). ``bounds``: read ``term_max.npy``
    (False for a folder whose metadata does not record it: written before it was).
    ``block_size``: the block size of the block maxima the folder records (None: none read)."""
    mode = None if in_memory else "r"
    mapped = {name: np.load(folder / f"{name}.npy", mmap_mode=mode) for name in ("data", "indices", "indptr")}
    if (folder / "vocab.txt").is_file():
        terms = (folder / "vocab.txt").read_text(encoding="utf-8", errors="surrogatepass").split("\n")[:-1]
        vocab: Mapping[str, int] = {t: i for i, t in enumerate(terms)}
    else:
        vocab = HashedVocab(np.load(folder / "vocab_hash.npy", mmap_mode="r"), np.load(folder / "vocab_ids.npy", mmap_mode="r"))
    nonoccurrence = np.load(folder / "nonoccurrence.npy") if (folder / "nonoccurrence.npy").is_file() else None
    term_max = np.load(folder / "term_max.npy", mmap_mode=mode) if bounds else None
    blocks = None if block_size is None else tuple(np.load(folder / name, mmap_mode=mode) for name in BLOCK_FILES)
    return Postings(mapped["data"], mapped["indices"], mapped["indptr"], vocab, nonoccurrence, num_docs, term_max=term_max,
                    blocks=blocks, block_size=block_size)


# ------------------------------------------------------------------------------ serving shards

_SPLIT_BLOCK = 1 << 25  # postings read at once while splitting (~256 MB of data and indices)


def split_postings(postings: Postings, bounds: Sequence[tuple[int, int]], folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Write, for every passage range ``bounds[i]``, the postings of its passages to ``folders[i]``.

    Each shard keeps the global scores (computed with the whole corpus's document frequencies
    and mean length) and the global passage positions, so a query's scores on a shard are the
    very float32 values the whole index gives, and the merged top-k of the shards is the whole
    index's top-k. Works through the postings a block at a time (bounded memory).
    """
    indptr = np.asarray(postings.indptr)
    n_vocab = len(indptr) - 1
    blocks = _term_blocks(indptr)
    counts = [np.zeros(n_vocab, dtype=np.int64) for _ in bounds]
    for t0, t1 in blocks:  # pass 1: how many postings of each term fall in each shard
        p0, p1 = indptr[t0], indptr[t1]
        docs = np.asarray(postings.indices[p0:p1])
        starts, ends = indptr[t0:t1] - p0, indptr[t0 + 1 : t1 + 1] - p0
        for counted, (a, b) in zip(counts, bounds):
            inside = np.concatenate(([0], np.cumsum((docs >= a) & (docs < b))))
            counted[t0:t1] = inside[ends] - inside[starts]
    outputs = []
    for counted, folder in zip(counts, folders):
        folder.mkdir(parents=True, exist_ok=True)
        shard_indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(counted, out=shard_indptr[1:])
        total = int(shard_indptr[-1])
        outputs.append((shard_indptr, MappedNpy(folder / "data.npy", np.float32, (total,)), MappedNpy(folder / "indices.npy", np.int32, (total,))))
    filled = [0] * len(bounds)
    for t0, t1 in blocks:  # pass 2: copy them, in term order (postings stay ascending within a term)
        p0, p1 = indptr[t0], indptr[t1]
        docs = np.asarray(postings.indices[p0:p1])
        data = np.asarray(postings.data[p0:p1])
        for s, (a, b) in enumerate(bounds):
            keep = (docs >= a) & (docs < b)
            n = int(keep.sum())
            _, shard_data, shard_indices = outputs[s]
            shard_data.write(filled[s], data[keep])
            shard_indices.write(filled[s], docs[keep])
            filled[s] += n
    metas = []
    for (shard_indptr, shard_data, shard_indices), folder in zip(outputs, folders):
        files = {"data.npy": shard_data.record(), "indices.npy": shard_indices.record()}
        shard = Postings(shard_data.array, shard_indices.array, shard_indptr, postings.vocab, postings.nonoccurrence,
                         postings.num_docs, files)
        metas.append(save_postings(shard, folder))
    return metas


def _term_blocks(indptr: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive term ranges of at most about ``_SPLIT_BLOCK`` postings each."""
    blocks = []
    t0, n_vocab = 0, len(indptr) - 1
    while t0 < n_vocab:
        t1 = int(np.searchsorted(indptr, indptr[t0] + _SPLIT_BLOCK, side="right")) - 1
        t1 = min(max(t1, t0 + 1), n_vocab)
        blocks.append((t0, t1))
        t0 = t1
    return blocks
