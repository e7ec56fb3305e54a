"""Search-R1's own rollout client against a real `searchgym serve` process on 127.0.0.1, the
HTTP retriever's corpus check through the server's /info, and a port already in use.

The client below does what Search-R1's ``search_r1/llm_agent/generation.py`` does each turn
(written from its behaviour, not copied): take the query of every rollout whose turn holds
``<search>...</search>``, post them all in one ``batch_search`` (also when no rollout searched:
an empty list), read ``response.json()["result"]`` and format each row's documents as
``Doc {i}(Title: {first line of contents}) {the other lines}``, one line each.
"""

import re
import subprocess
import warnings
from pathlib import Path

import gymnasium as gym
import httpx
import pytest
from test_serve import SEARCHGYM, Server, free_port

import searchgym  # noqa: F401  (registers the ids)
from searchgym.corpora.http import HTTPRetriever
from searchgym.corpora.registry import load_corpus
from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.store import write_passages
from searchgym.error import CorpusMismatchError

SMALL = {"seed": 7, "num_passages": 400}


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def local():
    return make_retriever("bm25", load_corpus("synthwiki", **SMALL))


class SearchR1Client:
    """One rollout step of Search-R1's generation manager, as it talks to ``search_url``."""

    def __init__(self, search_url: str, topk: int = 3):
        self.search_url, self.topk = search_url, topk

    def batch_search(self, queries: list[str], return_scores: bool = True) -> list:
        payload = {"queries": queries, "topk": self.topk, "return_scores": return_scores}
        return httpx.post(self.search_url, json=payload, timeout=30).json()["result"]  # KeyError on any other shape

    @staticmethod
    def passages_to_string(row: list[dict]) -> str:
        lines = []
        for i, item in enumerate(row, start=1):
            contents = item["document"]["contents"]
            title, _, text = contents.partition("\n")
            lines.append(f"Doc {i}(Title: {title}) {text}\n")
        return "".join(lines)

    def execute_predictions(self, predictions: list[str]) -> list[str]:
        """The next observation of every rollout (answers and invalid turns get their own)."""
        actions = [re.search(r"<(search|answer)>(.*?)</\1>", p, re.DOTALL) for p in predictions]
        queries = [m.group(2).strip() for m in actions if m and m.group(1) == "search"]
        results = [self.passages_to_string(row) for row in self.batch_search(queries)]
        assert len(results) == len(queries)
        observations = []
        for m in actions:
            if m and m.group(1) == "search":
                observations.append(f"\n\n<information>{results.pop(0).strip()}</information>\n\n")
            else:
                observations.append("" if m else "\nMy previous action is invalid.\n")
        return observations


def expected_information(hits) -> str:
    text = "".join(f"Doc {i}(Title: {h.passage.contents.partition(chr(10))[0]}) {h.passage.contents.partition(chr(10))[2]}\n"
                   for i, h in enumerate(hits, start=1))
    return f"\n\n<information>{text.strip()}</information>\n\n"


def test_search_r1_client_plays_turns_with_and_without_searches(server, local):
    client = SearchR1Client(server.url + "/retrieve")
    # A turn in which no rollout searched: Search-R1 still posts an empty batch.
    assert client.execute_predictions(["<answer> Paris </answer>", "no tags at all"]) == ["", "\nMy previous action is invalid.\n"]
    raw = httpx.post(server.url + "/retrieve", json={"queries": [], "topk": 3, "return_scores": True}, timeout=30)
    assert raw.status_code == 200 and raw.json() == {"result": []}
    turn = ["<think>x</think><search> Pamsaesorn settled </search>", "<answer> a </answer>", "<search>river of the city</search>"]
    observations = client.execute_predictions(turn)
    expected = local.search(["Pamsaesorn settled", "river of the city"], 3)
    assert observations == [expected_information(expected[0]), "", expected_information(expected[1])]
    assert observations[0].startswith('\n\n<information>Doc 1(Title: "')  # the title line keeps its quotes, as in Search-R1


def test_both_return_scores_shapes(server, local):
    client = SearchR1Client(server.url + "/retrieve", topk=2)
    hits = local.search(["annual festival market"], 2)[0]
    scored = client.batch_search(["annual festival market"], return_scores=True)
    assert scored == [[{"document": {"id": h.passage.id, "contents": h.passage.contents}, "score": float(h.score)} for h in hits]]
    bare = client.batch_search(["annual festival market"], return_scores=False)
    assert bare == [[{"id": h.passage.id, "contents": h.passage.contents} for h in hits]]
    assert client.batch_search([], return_scores=False) == []
    # HTTPRetriever reads both shapes (scores 0.0 for bare documents) and never posts an empty batch.
    remote = HTTPRetriever(server.url + "/retrieve")
    assert [h.passage for h in remote.search(["annual festival market"], 2)[0]] == [h.passage for h in hits]
    assert remote.search([], 2) == [] and remote.search(["  "], 2) == [[]]


# ------------------------------------------------------------------ corpus check through /info
def step_search(env):
    env.reset(seed=0)
    return env.step("<search> river of the city </search>")


def test_an_env_over_another_corpus_is_refused_or_warned(server):
    url = server.url + "/retrieve"
    other = {"seed": 8, "num_passages": 400}  # the server holds seed 7
    env = gym.make("searchgym/SearchR1-v0", retriever=url, corpus_options=other)
    with pytest.raises(CorpusMismatchError, match=r"serves the corpus 'synthwiki-s7-n400' \(fingerprint [0-9a-f]{16}\), but the env's "
                       r"corpus is 'synthwiki-s8-n400' \(fingerprint [0-9a-f]{16}\).*corpus_check': 'warn'\} only warns"):
        step_search(env)
    with pytest.raises(CorpusMismatchError):  # every later search too: catching the first error does not let a run go on
        step_search(env)
    env = gym.make("searchgym/SearchR1-v0", retriever=url, corpus_options=other, retriever_options={"corpus_check": "warn"})
    with pytest.warns(UserWarning, match="serves the corpus 'synthwiki-s7-n400'"):
        info = step_search(env)[4]
    assert len(info["retrieved_ids"]) == 3
    with warnings.catch_warnings():  # read once: the next search does not ask /info again
        warnings.simplefilter("error")
        step_search(env)
    env = gym.make("searchgym/SearchR1-v0", retriever=url, corpus_options=other, retriever_options={"corpus_check": "off"})
    assert len(step_search(env)[4]["retrieved_ids"]) == 3
    same = gym.make("searchgym/SearchR1-v0", retriever=url, corpus_options=SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(step_search(same)[4]["retrieved_ids"]) == 3
    with pytest.raises(Exception, match="Unknown corpus_check 'warning'. Did you mean 'warn'"):
        HTTPRetriever(url, corpus_check="warning")


def serve_file(path: Path) -> Server:
    """`searchgym serve --corpus PATH` (Server's own flags hold the synthwiki world's options)."""
    server = Server.__new__(Server)
    server.port = free_port()
    server.proc = subprocess.Popen([SEARCHGYM, "serve", "--corpus", str(path), "--port", str(server.port)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server.line = server.proc.stdout.readline()
    assert server.line, server.proc.stderr.read()[-2000:]
    server.url = f"http://127.0.0.1:{server.port}"
    return server


def test_a_file_corpus_is_checked_from_its_passage_store_without_opening_it(tmp_path, server):
    world = load_corpus("synthwiki", seed=3, num_passages=120)
    path = write_passages(world, tmp_path / "passages.jsonl")
    assert load_corpus(str(path)).fingerprint == world.fingerprint  # builds the passage store once, as an earlier run would
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"id": "q1", "question": "where?", "golden_answers": ["x"]}\n')
    own = serve_file(path)
    try:
        assert httpx.get(own.url + "/info").json()["fingerprint"] == world.fingerprint
        env = gym.make("searchgym/SearchR1-v0", corpus=str(path), dataset=str(qa), retriever=own.url + "/retrieve")
        assert len(step_search(env)[4]["retrieved_ids"]) == 3
        assert env.unwrapped.corpus.opened is False  # the fingerprint came from the store's meta.json
    finally:
        own.stop()
    # The same file against the module's server (synthwiki seed 7): refused, and still not opened.
    env = gym.make("searchgym/SearchR1-v0", corpus=str(path), dataset=str(qa), retriever=server.url + "/retrieve")
    with pytest.raises(CorpusMismatchError, match=rf"env's corpus is '{re.escape(str(path))}' \(fingerprint {world.fingerprint}\)"):
        step_search(env)
    assert env.unwrapped.corpus.opened is False
    # A file without a passage store here (or not here at all: the server holds it) cannot be
    # checked cheaply: searches go on and nothing is opened or built.
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_bytes(path.read_bytes())
    for corpus in (fresh, tmp_path / "only-on-the-server.jsonl"):
        env = gym.make("searchgym/SearchR1-v0", corpus=str(corpus), dataset=str(qa), retriever=server.url + "/retrieve")
        assert len(step_search(env)[4]["retrieved_ids"]) == 3 and env.unwrapped.corpus.opened is False
    assert not (tmp_path / "fresh.jsonl.searchgym").exists()


def test_a_port_in_use_is_one_clear_line(server):
    done = subprocess.run([SEARCHGYM, "serve", "--port", str(server.port)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (f"searchgym serve: error: searchgym serve cannot listen on 127.0.0.1:{server.port}: the port is in use "
                           "(another server, perhaps an earlier `searchgym serve`, holds it); stop that server or pick another --port.\n")
    assert httpx.get(server.url + "/health").json()["status"] == "ok"  # the running server is untouched


# ------------------------------------------------------------------ Search-R1's training batch
class SearchR1Requests:
    """Search-R1's ``LLMGenerationManager`` talking to ``retriever.url``, step for step
    (search_r1/llm_agent/generation.py:438-469 at a14dc3a): ``requests.post(url,
    json={"queries", "topk", "return_scores": True}).json()["result"]``, each row written as
    ``Doc {i}(Title: {line 1}) {the other lines}``. The one difference: a timeout, so that a
    hung server fails the test instead of holding it."""

    def __init__(self, search_url: str, topk: int = 3):
        self.requests = pytest.importorskip("requests")
        self.search_url, self.topk = search_url, topk

    def batch_search(self, queries: list[str]) -> list[str]:
        payload = {"queries": queries, "topk": self.topk, "return_scores": True}
        results = self.requests.post(self.search_url, json=payload, timeout=300).json()["result"]
        return [self.passages2string(result) for result in results]

    @staticmethod
    def passages2string(retrieval_result: list[dict]) -> str:
        reference = ""
        for idx, doc_item in enumerate(retrieval_result):
            content = doc_item["document"]["contents"]
            title = content.split("\n")[0]
            text = "\n".join(content.split("\n")[1:])
            reference += f"Doc {idx + 1}(Title: {title}) {text}\n"
        return reference


def training_turn_queries(corpus, n: int) -> list[str]:
    """``n`` distinct agent-like queries (a title, a word of its passage, a number), as a
    turn of 512 questions x 5 rollouts sends them."""
    out = []
    for i in range(n):
        passage = corpus[i % len(corpus)]
        words = passage.text.split()
        out.append(f"{passage.title} {words[(i // len(corpus)) % len(words)]} {1800 + i}")
    return out


def test_search_r1s_client_posts_a_whole_training_turn_of_2560_queries(server, local):
    """Search-R1's GRPO scripts: data.train_batch_size=512 x actor_rollout_ref.rollout.n_agent=5
    (train_grpo.sh:34,62), every searching rollout's query in one request, against the server's
    default limits."""
    before = httpx.get(server.url + "/info").json()
    assert before["limits"]["max_queries"] >= 2560
    queries = training_turn_queries(local.corpus, 2560)
    assert len(set(queries)) == 2560
    client = SearchR1Requests(server.url + "/retrieve")
    rows = client.batch_search(queries)
    expected = local.search(queries, 3)
    assert rows == [SearchR1Requests.passages2string([{"document": {"contents": h.passage.contents}} for h in hits])
                    for hits in expected]
    assert sum(row.count("Doc ") for row in rows) > 2560  # real documents, not empty rows
    after = httpx.get(server.url + "/info").json()["coalescing"]["served"]
    assert after["queries"] - before["coalescing"]["served"]["queries"] == 2560
    assert after["batches"] - before["coalescing"]["served"]["batches"] >= 5  # searched in chunks of at most 512


def test_a_batch_past_the_default_limit_gets_a_json_413(server):
    over = httpx.get(server.url + "/info").json()["limits"]["max_queries"] + 1
    response = httpx.post(server.url + "/retrieve", json={"queries": ["a city"] * over, "topk": 3, "return_scores": True}, timeout=60)
    assert response.status_code == 413
    assert response.json() == {"error": f"{over} queries exceed max_queries={over - 1} per request; split the batch", "status": 413}
    documents = httpx.post(server.url + "/retrieve", json={"queries": ["a city"] * 4000, "topk": 11}, timeout=60)
    assert documents.status_code == 413 and "documents exceed max_documents=40960" in documents.json()["error"]
