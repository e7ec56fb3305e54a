"""BrowseComp-Plus's released files, read by path; and look-alike files for tests.

BrowseComp-Plus (Chen et al. 2025, github.com/texttron/BrowseComp-Plus; Hugging Face datasets
``Tevatron/browsecomp-plus-corpus`` and ``Tevatron/browsecomp-plus``) is a fixed corpus of
100,195 web documents and 830 questions, each with the documents needed to answer it. Nothing
is downloaded here: the user gets the files once (``docs/browsecomp-plus.md`` has the
commands) and passes their paths::

    load_corpus("data/browsecomp_plus_corpus.jsonl")
    load_dataset("data/browsecomp_plus_decrypted.jsonl",
                 qrels_evidence="topics-qrels/qrel_evidence.txt", qrels_gold="topics-qrels/qrel_golds.txt")

The formats, as the repository (commit 97c637ce) and the dataset cards define them:

* **Corpus** (``Tevatron/browsecomp-plus-corpus``, split ``train``; the repository's
  ``README.md:27-33``): rows ``{"docid": str, "text": str, "url": str}``. The FAISS searcher
  reads exactly ``row["docid"]`` and ``row["text"]`` (``searcher/searchers/faiss_searcher.py:211``).
  Docids are decimal strings (``"37403"``). Most texts open with a front matter
  ``---\\ntitle: ...\\nauthor: ...\\ndate: ...\\n---\\n`` followed by the page's text; the
  repository's tools take the title from it, or from the first line
  (``searcher/search_r1_server.py:35-41``, ``search_agent/tongyi_utils/tool_search.py:39-46``).
  Exported as JSON lines, a row is read by :func:`~searchgym.corpora.store.passage_from` as
  ``Passage(id=docid, title=document_title(text, url), text=text)`` (a ``title`` field, if a
  line has one, wins).
* **Queries** (``Tevatron/browsecomp-plus``, split ``test``, obfuscated): the dataset card
  lists ``query_id``, ``query``, ``answer`` and ``evidence_docs``, ``gold_docs``,
  ``negative_docs``, each a list of ``{"docid", "text", "url"}`` objects. The repository's
  ``scripts_build_index/decrypt_dataset.py`` decrypts every string of a row except
  ``query_id`` (``:23-36``, ``skip_keys = {"query_id"}`` at ``:73``) and writes one JSON object
  per line (``:86-91``, ``:110-116``), so the decrypted lines keep that shape, with plain
  doc ids. ``README.md:17-23`` runs it as ``python scripts_build_index/decrypt_dataset.py
  --output data/browsecomp_plus_decrypted.jsonl --generate-tsv topics-qrels/queries.tsv``; its
  evaluation reads ``obj["query_id"]``, ``obj["query"]``, ``obj["answer"]`` from that file
  (``scripts_evaluation/evaluate_run.py:41-51``). :func:`~searchgym.corpora.datasets.read_qa`
  reads such a line as ``QAExample(id=str(query_id), question=query, answers=(answer,))``
  with metadata ``evidence_ids``, ``gold_ids``, ``negative_ids`` and ``source``.
* **Qrels** (``topics-qrels/qrel_evidence.txt``, 5,064 lines, and ``topics-qrels/qrel_golds.txt``,
  2,407 lines, in the repository): TREC lines ``qid Q0 docid rel`` (``769 Q0 18639 1``; every
  ``rel`` is 1). Evidence documents are "needed to answer the query"; gold documents are
  needed and "semantically contain the final answer" (``README.md:140-149``; its command there
  names ``qrel_gold.txt``, the file is ``qrel_golds.txt``). The evaluation reads them
  as four whitespace-separated fields per line, keeping ``parts[0]`` and ``parts[2]``
  (``scripts_evaluation/evaluate_run.py:267-285``). :func:`read_qrels` reads them.
* **Search tools** of the official runs: ``search(query)`` returns the top ``k = 5`` hits
  (``searcher/mcp_server.py:43-46``), each ``{"docid", "score", "snippet"}`` whose snippet is
  the document's first 512 tokens of the Qwen3-0.6B tokenizer (``searcher/tools.py:36-49``,
  default ``--snippet-max-tokens 512`` at ``searcher/mcp_server.py:37-40`` and
  ``search_agent/openai_client.py:574-585``); ``get_document(docid)`` returns
  ``{"docid", "text"}``, the full text (``searcher/tools.py:66-82``,
  ``searcher/searchers/bm25_searcher.py:58-69``). :data:`SEARCH_K` and
  :data:`SNIPPET_TOKENS` hold these numbers.

:func:`write_browsecomp_like` writes small files of the same shapes (a corpus of long
front-matter documents, decrypted queries with their document lists, both qrels files), so a
pipeline can be tested without the real ones.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from searchgym.corpora.datasets import BROWSECOMP_SOURCE, read_qa
from searchgym.corpora.store import write_jsonl
from searchgym.corpora.types import QAExample
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError

__all__ = [
    "CORPUS_FILE", "QRELS_EVIDENCE_FILE", "QRELS_GOLD_FILE", "QRELS_LINE_FORMAT", "QUERIES_FILE", "SEARCH_K",
    "SNIPPET_TOKENS", "BrowseCompFiles", "apply_qrels", "load_queries", "read_qrels", "write_browsecomp_like",
]

#: Hits per ``search`` call in the official runs (``searcher/mcp_server.py:43-46``).
SEARCH_K = 5
#: Tokens (Qwen3-0.6B tokenizer) of a hit's snippet in the official runs (``searcher/tools.py:36-49``).
SNIPPET_TOKENS = 512

#: The files' names as the repository's commands write them (and :func:`write_browsecomp_like` too).
CORPUS_FILE = "browsecomp_plus_corpus.jsonl"
QUERIES_FILE = "browsecomp_plus_decrypted.jsonl"
QRELS_EVIDENCE_FILE = "qrel_evidence.txt"
QRELS_GOLD_FILE = "qrel_golds.txt"

QRELS_LINE_FORMAT = (
    "a TREC qrels line of four whitespace-separated fields, query_id iteration doc_id relevance "
    "(an integer), as in BrowseComp-Plus's topics-qrels/qrel_evidence.txt: '769 Q0 18639 1'"
)
_QRELS_FILE = "a TREC qrels file (one 'query_id iteration doc_id relevance' line per judged document)"


# ------------------------------------------------------------------------------------ qrels


def read_qrels(path: str | os.PathLike) -> dict[str, list[str]]:
    """The relevant doc ids of every query of a TREC qrels file, ``{query_id: [doc_id, ...]}``.

    Each non-blank line is ``query_id iteration doc_id relevance`` (whitespace-separated;
    the iteration field, ``Q0`` or ``0``, is not used). Documents with relevance > 0 are kept,
    in the file's order, each once; a query whose lines all have relevance <= 0 maps to an
    empty list (it was judged: none of its documents is relevant). A line of another shape,
    or a relevance that is not an integer, is a :class:`DataFormatError` naming the file and
    the line; a missing file a :class:`DataFileNotFoundError`.
    """
    path = Path(path)
    if not path.exists():
        raise DataFileNotFoundError(
            errno.ENOENT,
            f"No such qrels file: {str(path)!r}; expected {_QRELS_FILE}, such as topics-qrels/qrel_evidence.txt "
            "or topics-qrels/qrel_golds.txt of the BrowseComp-Plus repository",
            str(path),
        )
    if not path.is_file():
        raise DataFormatError(path, None, _QRELS_FILE, "a directory or another thing that is not a file; pass the qrels file itself")
    qrels: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    with path.open("rb") as f:
        for line_number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise DataFormatError(path, line_number, QRELS_LINE_FORMAT, f"bytes that are not UTF-8 at column {e.start + 1}") from e
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                shown = line.strip()
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise DataFormatError(
                    path, line_number, QRELS_LINE_FORMAT, f"{len(parts)} field{'s' if len(parts) != 1 else ''}: {shown!r}"
                )
            query_id, _iteration, doc_id, relevance = parts
            try:
                grade = int(relevance)
            except ValueError:
                raise DataFormatError(path, line_number, QRELS_LINE_FORMAT, f"relevance {relevance!r}, not an integer") from None
            docs = qrels.setdefault(query_id, [])
            if grade > 0 and (query_id, doc_id) not in seen:
                seen.add((query_id, doc_id))
                docs.append(doc_id)
    return qrels


def _qrels_of(value: Any, option: str) -> dict[str, list[str]] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {str(k): [str(d) for d in v] for k, v in value.items()}
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(
            f"{option} expects the path of a TREC qrels file (e.g. topics-qrels/{QRELS_EVIDENCE_FILE if 'evidence' in option else QRELS_GOLD_FILE}) "
            f"or a mapping of query ids to doc ids, got {type(value).__name__} {value!r}."
        )
    return read_qrels(value)


def apply_qrels(
    examples: Iterable[QAExample],
    *,
    evidence: str | os.PathLike | Mapping[str, Sequence[str]] | None = None,
    gold: str | os.PathLike | Mapping[str, Sequence[str]] | None = None,
) -> list[QAExample]:
    """The examples with ``metadata["evidence_ids"]`` / ``["gold_ids"]`` set from qrels.

    ``evidence`` and ``gold`` are qrels file paths (read by :func:`read_qrels`) or mappings
    ``{query_id: [doc_id, ...]}``. The qrels are the official relevance labels, so they
    override what a question's line had; a question with no qrels entry keeps its own.
    Returns new examples (the metadata is copied). A :class:`ConfigError` when a qrels file
    names none of the questions (the qrels of another dataset).
    """
    examples = list(examples)
    ids = {e.id for e in examples}
    tables = []
    for option, value, key in (("qrels_evidence", evidence, "evidence_ids"), ("qrels_gold", gold, "gold_ids")):
        table = _qrels_of(value, option)
        if table is None:
            continue
        if table and examples and not ids & set(table):
            shown = ", ".join(repr(q) for q in list(table)[:3])
            mine = ", ".join(repr(e.id) for e in examples[:3])
            raise ConfigError(
                f"{option} {str(value) if not isinstance(value, Mapping) else '<mapping>'} names none of the {len(examples)} "
                f"questions (its query ids: {shown}, ...; the questions': {mine}, ...); pass the qrels of this dataset."
            )
        tables.append((key, table))
    out = []
    for example in examples:
        updates = {key: list(table[example.id]) for key, table in tables if example.id in table}
        out.append(replace(example, metadata={**example.metadata, **updates}) if updates else example)
    return out


def load_queries(
    path: str | os.PathLike,
    *,
    qrels_evidence: str | os.PathLike | Mapping[str, Sequence[str]] | None = None,
    qrels_gold: str | os.PathLike | Mapping[str, Sequence[str]] | None = None,
) -> list[QAExample]:
    """The questions of a decrypted BrowseComp-Plus file (or any QA file :func:`read_qa`
    reads), their evidence and gold ids set from the qrels when given (:func:`apply_qrels`).
    ``load_dataset(path, qrels_evidence=..., qrels_gold=...)`` calls this."""
    examples = read_qa(path)
    if qrels_evidence is None and qrels_gold is None:
        return examples
    return apply_qrels(examples, evidence=qrels_evidence, gold=qrels_gold)


# ------------------------------------------------------------------------ look-alike files


class BrowseCompFiles(NamedTuple):
    """The files :func:`write_browsecomp_like` wrote."""

    folder: Path
    corpus: Path
    queries: Path
    qrels_evidence: Path
    qrels_gold: Path


_SYLLABLES = (
    "ka lo ri ven dor mi sa tel bru nan quo zer ha vi sel mor tan eli ost rua pel dag fin cor"
    " lum bre ska vol tur ami ney gal rho sin bex ulm"
).split()
_FILLER = (
    "the of and a to in is was for on that with as by at from his her their its an which were this had be"
    " are have been also after first new other more two one three years year time early later during between"
    " over into through under city town river school council station market season team family house church"
    " record album report program building village district government company museum library festival"
    " history member public local national regional annual small large old young long local original"
    " published opened started moved served joined became announced described reported listed held built"
    " played wrote said noted recalled continued remained returned received included featured"
).split()
_MONTHS = ("January February March April May June July August September October November December").split()
_KINDS = ("cooperative", "press", "foundation", "workshop", "society", "trading house", "studio")
_PRODUCTS = ("lantern", "ledger", "almanac", "loom", "compass", "kettle", "atlas", "barometer")


def _word(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_FILLER) for _ in range(rng.randint(8, 20))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), _word(rng))
    return " ".join(words).capitalize() + "."


def _body(rng: random.Random, words: int, facts: Sequence[str]) -> str:
    """Paragraphs of filler of about ``words`` words with ``facts`` placed at random in them."""
    sentences: list[str] = []
    count = 0
    while count < words:
        sentence = _sentence(rng)
        sentences.append(sentence)
        count += len(sentence.split())
    for fact in facts:
        sentences.insert(rng.randrange(len(sentences) + 1), fact)
    paragraphs, i = [], 0
    while i < len(sentences):
        size = rng.randint(4, 9)
        paragraphs.append(" ".join(sentences[i : i + size]))
        i += size
    return "\n\n".join(paragraphs)


def _document(rng: random.Random, doc_id: str, title: str, words: int, facts: Sequence[str]) -> dict[str, str]:
    """One corpus row: most open with the front matter the real documents have, some with the title line only."""
    year, month, day = rng.randint(1998, 2024), rng.randint(1, 12), rng.randint(1, 28)
    body = f"{title}\n\n{_body(rng, words, facts)}"
    if rng.random() < 0.8:
        author = f"author: {_word(rng)} {_word(rng, 3)}\n" if rng.random() < 0.5 else ""
        text = f"---\ntitle: {title}\n{author}date: {year}-{month:02d}-{day:02d}\n---\n{body}"
    else:
        text = body
    slug = "-".join(title.lower().split())[:60]
    return {"docid": doc_id, "text": text, "url": f"https://www.{_word(rng).lower()}.example/{slug}"}


def write_browsecomp_like(
    folder: str | os.PathLike, num_docs: int = 100, num_queries: int = 10, seed: int = 0, doc_words: int = 3000
) -> BrowseCompFiles:
    """Write small files shaped like BrowseComp-Plus's into ``folder`` and return their paths.

    * ``browsecomp_plus_corpus.jsonl``: ``num_docs`` lines ``{"docid", "text", "url"}``; docids
      are distinct decimal strings below 100,195; texts run about ``doc_words`` words (the real
      ones average 5,179) and most open with a ``---\\ntitle: ...\\ndate: ...\\n---`` front matter.
    * ``browsecomp_plus_decrypted.jsonl``: ``num_queries`` lines ``{"query_id", "query",
      "answer", "gold_docs", "negative_docs", "evidence_docs"}`` (the dataset card's order),
      each list of ``{"docid", "text", "url"}`` objects: the decrypted layout. A question asks
      for a fictional person by three facts spread over three evidence documents (placed
      anywhere in their long texts); the two that name the person are its gold documents.
    * ``qrel_evidence.txt`` and ``qrel_golds.txt``: ``qid Q0 docid 1`` lines agreeing with them.

    The same arguments write the same bytes. A :class:`ConfigError` when ``num_docs`` is
    below ``4 * num_queries`` (each question owns three documents, plus some distractors).
    """
    for name, value, least in (("num_docs", num_docs, 1), ("num_queries", num_queries, 1), ("doc_words", doc_words, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"write_browsecomp_like expects {name} to be a positive integer, got {value!r}.")
    if num_docs < 4 * num_queries:
        raise ConfigError(
            f"write_browsecomp_like expects num_docs >= 4 * num_queries (three documents per question and some "
            f"distractors), got num_docs={num_docs} and num_queries={num_queries}."
        )
    if num_queries > 1266:
        raise ConfigError(f"write_browsecomp_like expects at most 1266 queries (BrowseComp's ids), got {num_queries}.")
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    doc_ids = [str(i) for i in rng.sample(range(100_195), num_docs)]
    query_ids = [str(i) for i in rng.sample(range(1, 1267), num_queries)]
    lengths = [max(1, int(doc_words * rng.uniform(0.7, 1.3))) for _ in range(num_docs)]
    docs: list[dict[str, str]] = []
    queries = []
    used_names: set[str] = set()
    for q, query_id in enumerate(query_ids):
        while True:
            person = f"{_word(rng)} {_word(rng, 3)}"
            if person not in used_names:
                used_names.add(person)
                break
        city, org = _word(rng, 3), f"{_word(rng)} {rng.choice(_KINDS).title()}"
        product = f"{_word(rng)} {rng.choice(_PRODUCTS)}"
        year, month = rng.randint(1820, 1960), rng.choice(_MONTHS)
        ids = doc_ids[3 * q : 3 * q + 3]
        bio = _document(rng, ids[0], f"{person} ({year}-{year + rng.randint(40, 90)})", lengths[3 * q],
                        [f"{person} was born in {city} in {month} {year}."])
        history = _document(rng, ids[1], f"A short history of the {org}", lengths[3 * q + 1],
                            [f"The {org} was founded by {person} in {year + rng.randint(20, 35)}.",
                             f"Its first product, the {product}, sold out within a year."])
        town = _document(rng, ids[2], f"{city}: notable people and places", lengths[3 * q + 2],
                         [f"One founder born in {city} in {year} went on to start the {org}."])
        docs += [bio, history, town]
        queries.append({
            "query_id": query_id,
            "query": (
                f"A person born in {city} in {year} later founded an organisation whose first product was called "
                f"the {product}. What is the full name of this person?"
            ),
            "answer": person,
            "evidence": [bio, history, town],
            "gold": [bio, history],
        })
    for i in range(3 * num_queries, num_docs):
        topic = f"{_word(rng)} {rng.choice(('River', 'Festival', 'Station', 'Museum', 'Council', 'Market'))}"
        docs.append(_document(rng, doc_ids[i], topic, lengths[i], [f"The {topic} opened in {rng.randint(1850, 2010)}."]))
    order = list(range(num_docs))
    rng.shuffle(order)  # question documents are not first in the file
    corpus = write_jsonl((docs[i] for i in order), folder / CORPUS_FILE)
    by_id = {d["docid"]: d for d in docs}
    records = []
    for query in queries:
        own = {d["docid"] for d in query["evidence"]}
        negatives = rng.sample([d for d in doc_ids if d not in own], min(5, num_docs - 3))
        records.append({
            "query_id": query["query_id"], "query": query["query"], "answer": query["answer"],
            "gold_docs": query["gold"], "negative_docs": [by_id[d] for d in negatives], "evidence_docs": query["evidence"],
        })
    queries_path = write_jsonl(records, folder / QUERIES_FILE)
    paths = {}
    for name, key in ((QRELS_EVIDENCE_FILE, "evidence"), (QRELS_GOLD_FILE, "gold")):
        lines = [f"{query['query_id']} Q0 {d} 1\n" for query in queries for d in sorted(x["docid"] for x in query[key])]
        paths[key] = folder / name
        paths[key].write_text("".join(lines), encoding="utf-8")
    return BrowseCompFiles(folder, corpus, queries_path, paths["evidence"], paths["gold"])
