"""The rules of ``searchgym/DeepResearch-v0``, each asserted exactly, over the fixture world of conftest.py."""

from __future__ import annotations

import pickle
import time

import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchgym.corpora import Corpus, Passage
from searchgym.deepresearch.documents import MAX_PATTERN_CHARS, DocumentStore

OPEN = {"doc_id": {"type": "string", "description": "A document id as the search results show it."},
        "page": {"type": "integer", "description": "The page number, from 1 (default 1)."}}


def call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def msg(*calls, content=""):
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def replies(info, n):
    return [m["content"] for m in info["messages"][-n:]]


def test_tools_offered(make_dr_env):
    env = make_dr_env()
    _, info = env.reset(seed=0)
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in info["tools"]}
    assert list(tools) == ["search", "answer", "open", "find"]
    assert tools["search"]["required"] == ["query"]
    assert tools["open"]["properties"] == OPEN and tools["open"]["required"] == ["doc_id"]
    assert tools["find"]["required"] == ["doc_id", "pattern"]
    assert set(tools["answer"]["properties"]) == {"answer", "citations", "confidence"}
    assert tools["answer"]["required"] == ["answer"]


@pytest.mark.parametrize("snippet_words,top_k", [(512, 5), (7, 2)])
def test_search_hits_show_id_title_and_snippet(make_dr_env, dr_world, snippet_words, top_k):
    corpus, _ = dr_world
    env = make_dr_env(protocol_options={"snippet_words": snippet_words}, top_k=top_k)
    env.reset(seed=0)
    _, _, _, _, info = env.step(msg(call("search", query="Velmora chronicler")))
    ids = info["retrieved_ids"]
    assert len(ids) == top_k
    text = replies(info, 1)[0]
    blocks = text.split("\n\n[")
    assert len([b for b in text.split("\n") if b.startswith("[") and b.split("]")[0][1:] in ids]) == top_k
    for doc_id in ids:
        p = corpus.get(doc_id)
        words = p.text.split()[:snippet_words]
        assert f"[{doc_id}] {p.title}\n" in text
        assert " ".join(words) + " ..." in " ".join(text.split())  # the first snippet_words words, then " ..."
    assert text.count(" ...") >= top_k and blocks


def test_pages_cover_the_document_in_order(make_dr_env, dr_world):
    corpus, _ = dr_world
    env = make_dr_env(max_calls=256, max_turns=300)
    env.reset(seed=0)
    for p in list(corpus)[:6]:
        pages, n, count = [], 1, None
        while count is None or n <= count:
            _, _, _, _, info = env.step(msg(call("open", doc_id=p.id, page=n)))
            head, _, body = replies(info, 1)[0].partition("\n")
            count = int(head.rsplit(" of ", 1)[1].rstrip(")"))
            assert head == f"[{p.id}] {p.title} (page {n} of {count})"
            pages.append(body)
            n += 1
        assert count == -(-len(p.text.split()) // 512)
        assert " ".join(pages).split() == p.text.split()  # no word lost or repeated


def test_find_gives_pages_and_at_most_max_find_results(make_dr_env, dr_world):
    corpus, examples = dr_world
    env = make_dr_env(protocol_options={"max_find_results": 2})
    env.reset(seed=0)
    store = DocumentStore(corpus)
    _, _, _, _, info = env.step(msg(call("find", doc_id="g0", pattern="Amber   Compass society"),
                                    call("find", doc_id="t0", pattern="valley")))
    found, many = replies(info, 2)
    text = corpus.get("g0").text
    # "Amber Compass Society" is in the title line, the facts, ...: each place's page is the page of its words
    total = text.lower().count("amber compass society")
    assert found.startswith(f"[g0] Amber Compass Society ({store.pages('g0')} pages): the first 2 of {total} places hold")
    lines = found.split("\n")[1:]
    assert len(lines) == 2
    words = text.split()
    starts = [i for i in range(len(words) - 2) if " ".join(words[i:i + 3]).lower().rstrip(".,") == "amber compass society"]
    assert [int(line.split(":")[0].split()[-1]) for line in lines] == [s // 512 + 1 for s in starts[:2]]
    assert len(many.split("\n")) == 3  # head + 2


def test_find_is_literal_and_bounded():
    text = " ".join(["a"] * 10) + " ((a+)+)+$ and .* here " + "b " * 999_000
    corpus = Corpus([Passage("big", "Big", text[:2_000_000])])
    store = DocumentStore(corpus, max_find_results=10)
    t = time.perf_counter()
    assert store.find("big", "((a+)+)+$").total == 1
    assert store.find("big", ".*").total == 1
    assert store.find("big", "a" * 30 + "!").total == 0
    assert time.perf_counter() - t < 10  # sanity only: a backtracking regex would not end


def test_bad_calls_get_a_message_never_an_exception(make_dr_env, tmp_path):
    env = make_dr_env()
    env.reset(seed=0)
    bad = [
        (call("open", doc_id="nope"), "Error: there is no document with id 'nope'; use a doc id as the search results show it."),
        (call("open", doc_id="t0", page=0), "Error: page 0 is out of range: document t0 has 4 pages (1 to 4)."),
        (call("open", doc_id="t0", page=99), "Error: page 99 is out of range: document t0 has 4 pages (1 to 4)."),
        (call("open", doc_id="t0", page="2"), "Error: open expects page to be an integer, got a string."),
        (call("open"), None),
        (call("find", doc_id="t0"), None),
        (call("find", doc_id="t0", pattern="x" * (MAX_PATTERN_CHARS + 1)), None),
        (call("open", doc_id="../../etc/passwd"), "Error: there is no document with id '../../etc/passwd'; use a doc id as the search results show it."),
        (call("open", doc_id="/etc/passwd"), "Error: there is no document with id '/etc/passwd'; use a doc id as the search results show it."),
        (call("find", doc_id="file:///etc/passwd", pattern="root"), "Error: there is no document with id 'file:///etc/passwd'; use a doc id as the search results show it."),
    ]
    for c, expected in bad:
        _, _, terminated, _, info = env.step(msg(c))
        text = replies(info, 1)[0]
        assert text.startswith("Error:") and not terminated, (c, text)
        if expected:
            assert text == expected
        assert "root:" not in text
    assert "find's pattern must be at most 200 characters" in replies(env.step(msg(bad[6][0]))[4], 1)[0]
    assert "doc_id" in replies(env.step(msg(call("open")))[4], 1)[0]
    assert env.unwrapped.game.num_calls == 0  # refused calls are not counted


def test_parallel_calls_are_all_answered(make_dr_env):
    env = make_dr_env()
    env.reset(seed=0)
    _, _, _, _, info = env.step(msg(call("search", query="Velmora"), call("open", doc_id="t0", page=2),
                                    call("find", doc_id="g0", pattern="founded by")))
    s, o, f = replies(info, 3)
    assert s.startswith("[t0] Velmora") and o.startswith("[t0] Velmora (page 2 of 4)") and f.startswith("[g0] Amber Compass Society (")
    assert "pages): 1 place holds 'founded by'." in f.split("\n")[0]
    assert info["num_calls"] == 3 and info["action_kinds"] == ("search", "open", "find")


@pytest.mark.parametrize("max_calls", [3, 256])
def test_call_budget(make_dr_env, max_calls):
    env = make_dr_env(max_calls=max_calls, max_turns=300)
    env.reset(seed=0)
    before = 0
    notice = f"The call budget ({max_calls} calls) is spent: this call was not run. Now call answer."
    for turn in range(90):
        _, _, _, truncated, info = env.step(msg(call("open", doc_id="t0", page=1 + turn % 4),
                                                call("find", doc_id="g0", pattern="founded"), call("search", query=f"q{turn}")))
        assert info["num_calls"] == min(before + 3, max_calls) and not truncated
        if before + 3 > max_calls:  # the calls past the budget were not run, and say so
            assert replies(info, 3).count(notice) == before + 3 - max_calls
            break
        assert notice not in replies(info, 3)
        before += 3
    _, _, _, _, info = env.step(msg(call("open", doc_id="t0")))
    assert replies(info, 1) == [notice] and info["num_calls"] == max_calls


def test_context_bound_truncates(make_dr_env):
    env = make_dr_env(max_context_tokens=1200)
    env.reset(seed=0)
    for page in range(1, 5):
        _, _, terminated, truncated, info = env.step(msg(call("open", doc_id="t3", page=page)))
        if truncated:
            break
    assert truncated and not terminated and info["context_full"]
    assert "reward_components" in info


class MyRetriever:
    def __init__(self, corpus):
        self.corpus = corpus

    def search(self, queries, k):
        from searchgym.corpora.types import Hit
        return [[Hit(p, 1.0) for p in list(self.corpus)[:k]] for _ in queries]


def test_other_options(make_dr_env, dr_world, monkeypatch, tmp_path):
    corpus, examples = dr_world
    (tmp_path / "dr_user_retriever.py").write_text(
        "from searchgym.corpora.types import Hit\n"
        "class First:\n"
        "    def __init__(self, corpus):\n        self.corpus = corpus\n"
        "    def search(self, queries, k):\n        return [[Hit(p, 1.0) for p in list(self.corpus)[:k]] for _ in queries]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_dr_env(retriever="dr_user_retriever:First")
    env.reset(seed=0)
    assert env.step(msg(call("search", query="anything")))[4]["retrieved_ids"] == [p.id for p in list(corpus)[:5]]
    env = make_dr_env(retriever="bm25", limit=2)
    assert len(env.unwrapped.examples) == 2
    env = make_dr_env(reward_options={"citation_weight": 0.5})
    env.reset(options={"example_index": 0})
    _, reward, terminated, _, info = env.step(msg(call("answer", answer="Ilsa Marrowgate", citations=["p0"])))
    assert terminated and reward == pytest.approx(1.0 + 0.5 * 0.5)
    env = make_dr_env(dataset=None, corpus=corpus) if False else None  # datasets by name/split need deepwiki


def test_tag_grammar(make_dr_env):
    env = make_dr_env(action_format="tags")
    obs, _ = env.reset(options={"example_index": 0})
    assert "<open> doc_id page </open>" in obs
    o, _, _, _, info = env.step("<open> t0 2 </open>")
    assert "[t0] Velmora (page 2 of 4)" in o and o.strip().startswith("<information>")
    o, _, _, _, info = env.step("<find> g0 | founded by </find>")
    assert "page 3: " in o or "page 2: " in o
    o, _, _, _, info = env.step("<open> t0 </open>")
    assert "(page 1 of 4)" in o
    _, reward, terminated, _, info = env.step("<citations> p0, t0 </citations><confidence> 90 </confidence><answer> Ilsa Marrowgate </answer>")
    assert terminated and reward == 1.0 and info["answer"] == "Ilsa Marrowgate"
    assert info["reward_components"]["confidence"] == 0.9


messages = st.fixed_dictionaries({"role": st.sampled_from(["assistant", "user", 3]), "content": st.one_of(st.text(), st.none())},
                                 optional={"tool_calls": st.lists(st.one_of(
                                     st.text(), st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3),
                                     st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
                                         {"name": st.sampled_from(["search", "open", "find", "answer", "x"]),
                                          "arguments": st.one_of(st.text(), st.dictionaries(
                                              st.sampled_from(["doc_id", "page", "pattern", "query", "answer", "citations", "confidence"]),
                                              st.one_of(st.text(), st.integers(), st.floats(), st.none(), st.lists(st.text(), max_size=3))))})})),
                                     max_size=4)})


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(action=st.one_of(st.text(), st.binary(), messages))
def test_random_actions_never_raise(make_dr_env, action):
    env = make_dr_env()
    env.reset(seed=0)
    env.step(action)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(action=st.one_of(st.text(), st.binary()))
def test_random_tag_turns_never_raise(make_dr_env, action):
    env = make_dr_env(action_format="tags")
    env.reset(seed=0)
    env.step(action.decode("utf-8", "replace") if isinstance(action, bytes) else action)


def test_huge_strings_never_raise(make_dr_env):
    env = make_dr_env()
    env.reset(seed=0)
    env.step("x" * 5_000_000)  # a reply without a call: the final answer
    env.reset(seed=0)
    env.step(msg(call("search", query="q" * 1_000_000), call("find", doc_id="t0", pattern="y" * 1_000_000)))


def test_gymnasium_check_env_and_pickling(make_dr_env):
    env = make_dr_env(action_format="tags")
    check_env(env.unwrapped, skip_render_check=True)
    env = make_dr_env().unwrapped
    env.reset(seed=5)
    env.step(msg(call("open", doc_id="t0", page=2)))
    clone = pickle.loads(pickle.dumps(env))
    finish = msg(call("answer", answer="x", citations=["t0"], confidence=10))
    a, b = env.step(finish), clone.step(finish)
    assert a[:4] == b[:4] and a[4]["reward_components"] == b[4]["reward_components"]
