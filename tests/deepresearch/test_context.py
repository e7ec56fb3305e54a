"""Context policies in the deep-research game (tool calls): old reads archived as stubs that
name the page to open again; a summary restarts the conversation."""


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"id": name, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def test_archive_names_the_page_to_open_again(make_dr_env):
    env = make_dr_env(context="archive", context_options={"keep_last": 1})
    env.reset(options={"example_index": 0})
    _, _, _, _, info = env.step(call("search", query="founded society"))
    doc = info["retrieved_ids"][0]
    env.step(call("open", doc_id=doc, page=2))
    _, _, _, _, info = env.step(call("find", doc_id=doc, pattern="born"))
    tool = [m["content"] for m in info["messages"] if m["role"] == "tool"]
    assert tool[0].startswith("[archived: search 'founded society' returned doc ids " + doc)
    assert tool[1] == f"[archived: open(doc_id={doc!r}, page=2); call again to see it]"
    assert not tool[2].startswith("[archived")
    assert info["context_rewrite"]["archived_turns"] == [2]


def test_summarize_restarts_from_the_question_and_the_summary(make_dr_env):
    env = make_dr_env(context="summarize", context_options={"max_tokens": 1})
    _, first = env.reset(options={"example_index": 0})
    _, _, _, _, info = env.step(call("search", query="founded society"))
    assert info["messages"][-1] == {"role": "user", "content": info["context_request"]["request"]}
    _, reward, terminated, _, info = env.step({"role": "assistant", "content": "<summary>searched once</summary>"})
    assert (reward, terminated) == (0.0, False)
    assert len(info["messages"]) == len(first["messages"]) and info["messages"][-1]["content"].endswith("searched once\n")
