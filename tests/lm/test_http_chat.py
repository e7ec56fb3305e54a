"""OpenAILM.chat: chat completions with tools, against a fake server process on 127.0.0.1
(tests/chat_server.py) that answers tool calls, broken ones, slowly or with errors."""

import json
import time

import pytest

from chat_server import running

from searchgym.error import BackendError, ConfigError
from searchgym.lm.http import OpenAILM
from searchgym.lm.replies import ChatReply, openai_messages

TOOLS = [
    {"type": "function", "function": {"name": "search", "description": "Search.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "answer", "description": "Answer.", "parameters": {
        "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}},
]

# A conversation as an env's info["messages"] holds it: arguments as dicts (Hugging Face's convention).
CONVERSATION = [
    {"role": "user", "content": "Question: who founded Kelvaro Industries?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_0_0", "type": "function", "function": {"name": "search", "arguments": {"query": "Kelvaro Industries"}}},
        {"id": "call_0_1", "type": "function", "function": {"name": "search", "arguments": '{"query": not json'}},
    ]},
    {"role": "tool", "tool_call_id": "call_0_0", "name": "search", "content": "(Title: Kelvaro Industries) founded by Ilvar Odrenko."},
    {"role": "tool", "tool_call_id": "call_0_1", "name": "search", "content": "Error: the arguments of search are invalid JSON."},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running(tmp_path_factory.mktemp("chat")) as process:
        yield process


@pytest.fixture
def lm(server):
    server.clear()
    return OpenAILM("m", base_url=server.url, tokenizer=None, backoff=0.01)


def message(**fields):
    return {"role": "assistant", "content": None} | fields


def call(id="call_1", name="search", arguments='{"query": "x"}', **fields):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}} | fields


def body(msg, **fields):
    return {"choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}]} | fields


def test_tools_and_dict_arguments_go_out_as_the_api_defines_and_tool_calls_come_back(server, lm):
    server.script("m", {"body": body(message(content="Let me look.", tool_calls=[call(), call("call_2", "answer", '{"answer": "Ilvar"}')]),
                                     usage={"prompt_tokens": 90, "completion_tokens": 21})})
    (reply,) = lm.chat([CONVERSATION], tools=TOOLS, max_new_tokens=64, temperature=0, seed=5)
    (sent,) = server.requests()
    assert sent["tools"] == TOOLS and sent["max_tokens"] == 64 and sent["temperature"] == 0 and "seed" not in sent  # greedy: no seed
    assert "tool_choice" not in sent  # the API's default: auto
    assistant, tool = sent["messages"][1], sent["messages"][2]
    # Dict arguments become JSON text; text that was never JSON stays as the model wrote it.
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"query": "Kelvaro Industries"}', '{"query": not json']
    assert tool == {"role": "tool", "tool_call_id": "call_0_0", "content": CONVERSATION[2]["content"]}  # no "name": not an API field
    assert isinstance(reply, ChatReply) and reply.token_ids == () and reply.finish_reason == "stop"
    assert reply.message == {"role": "assistant", "content": "Let me look.", "tool_calls": [call(), call("call_2", "answer", '{"answer": "Ilvar"}')]}
    assert reply.server_finish_reason == "tool_calls" and (reply.prompt_tokens, reply.completion_tokens) == (90, 21)
    assert reply.text == 'Let me look.\nsearch({"query": "x"})\nanswer({"answer": "Ilvar"})'
    assert CONVERSATION[1]["tool_calls"][0]["function"]["arguments"] == {"query": "Kelvaro Industries"}  # the caller's list is untouched


def test_each_conversation_is_one_request_with_its_own_seed_and_extra_fields(server, lm):
    conversations = [[{"role": "user", "content": f"Q{i}"}] for i in range(5)]
    server.script("m", *[{"body": body(message(content=f"A{i}"))} for i in range(5)])
    replies = lm.chat(conversations, tools=TOOLS, tool_choice="required", temperature=0.7, seed=[10, 11, 12, 13, 14],
                      extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    sent = sorted(server.requests(), key=lambda r: r["seed"])
    assert [(r["messages"][0]["content"], r["seed"]) for r in sent] == [(f"Q{i}", 10 + i) for i in range(5)]
    assert all(r["tool_choice"] == "required" and r["chat_template_kwargs"] == {"enable_thinking": False} for r in sent)
    # (The scripted replies go out in the order the requests arrive, which threads decide.)
    assert sorted(r.message["content"] for r in replies) == [f"A{i}" for i in range(5)]
    assert all(r.message.keys() == {"role", "content"} for r in replies)  # no call: no tool_calls key


def test_replies_come_back_in_the_order_of_their_conversations(server):
    player = OpenAILM("player", base_url=server.url, tokenizer=None)
    replies = player.chat([[{"role": "user", "content": f"Question: q{i}"}] for i in range(12)], tools=TOOLS)
    assert [json.loads(r.message["tool_calls"][0]["function"]["arguments"]) for r in replies] == [{"query": f"q{i}"} for i in range(12)]


MALFORMED = [
    # (the reply's body, the field and what was wrong, as the error says it)
    (body(message(tool_calls=[{"type": "function", "function": {"name": "search", "arguments": "{}"}}])),
     "choices[0].message.tool_calls[0].id to be a non-empty string of at most 256 characters, got nothing (the key is missing)"),
    (body(message(tool_calls=[call(id="")])), 'choices[0].message.tool_calls[0].id to be a non-empty string of at most 256 characters, got a string "" (0 characters)'),
    (body(message(tool_calls=[call(id="c" * 5000)])),
     'choices[0].message.tool_calls[0].id to be a non-empty string of at most 256 characters, got a string "' + "c" * 56 + '... (5000 characters)'),
    (body(message(tool_calls=[call(id=17)])), "choices[0].message.tool_calls[0].id to be a non-empty string of at most 256 characters, got a number 17"),
    (body(message(tool_calls=[call(), call()])), ('choices[0].message.tool_calls[1].id to be an id no other call of the reply has, '
                                                  'got a string "call_1" again (choices[0].message.tool_calls[0] has it)')),
    (body(message(tool_calls=[call(name=7)])), "choices[0].message.tool_calls[0].function.name to be a non-empty string of at most 256 characters, got a number 7"),
    (body(message(tool_calls=[call(name=None)])), "choices[0].message.tool_calls[0].function.name to be a non-empty string of at most 256 characters, got null"),
    (body(message(tool_calls=[call(name="s" * 100_000)])),
     'choices[0].message.tool_calls[0].function.name to be a non-empty string of at most 256 characters, got a string "' + "s" * 56 + '... (100000 characters)'),
    (body(message(tool_calls=[call(arguments={"query": "x"})])),
     'choices[0].message.tool_calls[0].function.arguments to be a string (the arguments as JSON text), got an object {"query": "x"}'),
    (body(message(tool_calls=[call(arguments=None)])), "choices[0].message.tool_calls[0].function.arguments to be a string (the arguments as JSON text), got null"),
    (body(message(tool_calls=[{"id": "c", "type": "function", "function": {"name": "search"}}])),
     "choices[0].message.tool_calls[0].function.arguments to be a string (the arguments as JSON text), got nothing (the key is missing)"),
    (body(message(tool_calls=[{"id": "c", "type": "function"}])),
     'choices[0].message.tool_calls[0].function to be an object with "name" and "arguments", got nothing (the key is missing)'),
    (body(message(tool_calls=[call(type="code_interpreter")])), 'choices[0].message.tool_calls[0].type to be "function", got a string "code_interpreter"'),
    (body(message(tool_calls=["search"])), 'choices[0].message.tool_calls[0] to be an object with "id", "type" and "function", got a string "search"'),
    (body(message(tool_calls=[call(id=f"c{i}") for i in range(65)])),
     "choices[0].message.tool_calls to be null or a list of at most 64 tool calls (max_tool_calls), got a list of 65"),
    (body(message(tool_calls={"id": "c"})), 'choices[0].message.tool_calls to be null or a list of at most 64 tool calls (max_tool_calls), got an object {"id": "c"}'),
    (body(message(content=["a"])), 'choices[0].message.content to be a string or null, got a list ["a"]'),
    (body(message(role="user")), 'choices[0].message.role to be "assistant", got a string "user"'),
    ({"choices": [{"index": 0, "text": "a completion"}]}, "choices[0].message to be an object (the assistant's message), got nothing (the key is missing)"),
    (body(message()) | {"choices": [{"index": 0, "message": message()}, {"index": 1, "message": message()}]}, "choices to be a list of 1 (one per request), got a list of 2"),
    (body(message(), usage={"prompt_tokens": 3, "completion_tokens": -1}), "the body.usage.completion_tokens to be an integer >= 0 or null, got a number -1"),
    (body(message(), usage={"prompt_tokens": "3"}), 'the body.usage.prompt_tokens to be an integer >= 0 or null, got a string "3"'),
    (body(message(), usage=[]), "the body.usage to be an object or null, got a list []"),
    ({"choices": [{"index": 0, "message": message(), "finish_reason": 3}]}, "choices[0].finish_reason to be a string or null, got a number 3"),
]


@pytest.mark.parametrize("reply, problem", MALFORMED, ids=[f"malformed-{i}" for i in range(len(MALFORMED))])
def test_every_field_of_a_chat_reply_is_checked_and_named(server, lm, reply, problem):
    server.script("m", {"body": reply})
    with pytest.raises(BackendError) as e:
        lm.chat([CONVERSATION], tools=TOOLS)
    assert str(e.value) == f"The server at {server.url}/chat/completions answered with a malformed chat completion: expected {problem}."
    assert len(server.requests()) == 1  # a malformed reply is not a transient failure


def test_what_the_model_got_wrong_is_passed_on_for_the_env_to_answer(server, lm):
    # Arguments that are not JSON, an unknown tool, a missing argument: well-formed replies
    # whose calls are the model's bad calls, which the env answers and penalizes.
    calls = [call("a", arguments='{"query": "x"'), call("b", name="lookup"), call("c", arguments="{}")]
    server.script("m", {"body": body(message(tool_calls=calls))})
    (reply,) = lm.chat([CONVERSATION], tools=TOOLS)
    assert reply.message["tool_calls"] == calls


def test_a_reply_slower_than_the_deadline_is_retried_then_reported(server, lm):
    slow = OpenAILM("m", base_url=server.url, timeout=0.5, max_retries=1, backoff=0.01)
    server.script("m", {"body": body(message(content="late")), "delay": 3}, {"body": body(message(content="late")), "delay": 3})
    started = time.monotonic()
    with pytest.raises(BackendError) as e:
        slow.chat([CONVERSATION], tools=TOOLS)
    assert time.monotonic() - started < 2.5
    assert str(e.value) == f"The server at {server.url}/chat/completions timed out after 0.5 s (2 attempts); is it running and serving 'm'?"


def test_server_errors_are_retried_then_the_reply_is_read(server, lm):
    server.script("m", {"status": 503, "body": "busy"}, {"status": 500, "body": {"error": "overloaded"}}, {"body": body(message(tool_calls=[call()]))})
    (reply,) = lm.chat([CONVERSATION], tools=TOOLS)
    assert reply.message["tool_calls"] == [call()] and lm.last_attempts == 3 and len(server.requests()) == 3
    server.script("m", {"status": 400, "body": '{"error": {"message": "\\"auto\\" tool choice requires --enable-auto-tool-choice"}}'})
    with pytest.raises(BackendError) as e:
        lm.chat([CONVERSATION], tools=TOOLS)
    assert str(e.value) == (  # not retried: the server's own words say what to fix
        f"The server at {server.url}/chat/completions refused the request with HTTP 400: "
        '{"error": {"message": "\\"auto\\" tool choice requires --enable-auto-tool-choice"}}'
    )
    server.script("m", {"body": "<html>gateway</html>"})
    with pytest.raises(BackendError, match=r"chat/completions answered with something that is not JSON: '<html>gateway</html>'"):
        lm.chat([CONVERSATION], tools=TOOLS)


def test_a_conversation_too_long_for_the_model_and_a_max_tokens_cap(server, lm):
    too_long = {"status": 400, "body": {"error": {"message": "This model's maximum context length is 2048 tokens. However, your prompt contains 3000 input tokens."}}}
    server.script("m", too_long)
    (reply,) = lm.chat([CONVERSATION], tools=TOOLS)
    assert reply.finish_reason == "prompt_too_long" and reply.message == {"role": "assistant", "content": ""} and reply.text == ""
    capped = {"status": 400, "body": {"error": {"message": "max_tokens=5000 cannot be greater than max_model_len=2048. Please request fewer output tokens."}}}
    server.script("m", capped, {"body": body(message(content="ok"), choices=[{"index": 0, "message": message(content="ok"), "finish_reason": "length"}])})
    (reply,) = lm.chat([CONVERSATION], tools=TOOLS, max_new_tokens=5000)
    assert reply.finish_reason == "length" and [r["max_tokens"] for r in server.requests()[-2:]] == [5000, 2048]
    # vLLM calls a reply cut after its first complete call "tool_calls": its count says it was cut.
    server.script("m", {"body": body(message(tool_calls=[call()]), usage={"prompt_tokens": 900, "completion_tokens": 64})})
    (reply,) = lm.chat([CONVERSATION], tools=TOOLS, max_new_tokens=64)
    assert (reply.finish_reason, reply.server_finish_reason) == ("length", "tool_calls")
    server.script("m", {"body": body(message(tool_calls=[call()]), usage={"prompt_tokens": 900, "completion_tokens": 63})})
    assert lm.chat([CONVERSATION], tools=TOOLS, max_new_tokens=64)[0].finish_reason == "stop"


def test_bad_arguments_are_config_errors(lm):
    with pytest.raises(ConfigError, match=r"^OpenAILM.chat expects a list of conversations \(each a list of messages\), got dict\.$"):
        lm.chat({"role": "user", "content": "hi"})
    with pytest.raises(ConfigError, match=r"^OpenAILM.chat \(conversation 0\) expects each conversation to be a non-empty list of chat messages, got str 'hi'\.$"):
        lm.chat(["hi"])
    with pytest.raises(ConfigError, match=r"expects each message to be an object with a string \"role\", got dict \{'content': 'x'\} at message 0\."):
        lm.chat([[{"content": "x"}]])
    with pytest.raises(ConfigError, match=r"expects each tool call to be .* got str 'search' at message 1, call 0\."):
        lm.chat([[CONVERSATION[0], {"role": "assistant", "content": "", "tool_calls": ["search"]}]])
    with pytest.raises(ConfigError, match=r"expects tool-call arguments that JSON can write, got set \{1\} at message 1, call 0"):
        lm.chat([[CONVERSATION[0], {"role": "assistant", "tool_calls": [{"function": {"name": "s", "arguments": {1}}}]}]])
    with pytest.raises(ConfigError, match=r"^OpenAILM.chat expects each tool to be a function schema .* got str 'search' at tools\[0\]\.$"):
        lm.chat([CONVERSATION], tools=["search"])
    with pytest.raises(ConfigError, match=r"^OpenAILM.chat expects tools to be a list of function schemas, got dict"):
        lm.chat([CONVERSATION], tools=TOOLS[0])
    with pytest.raises(ConfigError, match=r"^OpenAILM.chat expects tool_choice to be 'auto', 'none', 'required', a named function or None, got 'any'\.$"):
        lm.chat([CONVERSATION], tools=TOOLS, tool_choice="any")
    with pytest.raises(ConfigError, match=r"^OpenAILM.chat: extra_body may not set messages, model; pass tools= and the conversations instead\.$"):
        lm.chat([CONVERSATION], extra_body={"model": "x", "messages": []})
    with pytest.raises(ConfigError, match=r"^OpenAILM expects max_tool_calls to be an integer >= 1, got 0\.$"):
        OpenAILM("m", max_tool_calls=0)
    assert lm.chat([]) == []


def test_openai_messages_keeps_the_api_fields_of_each_role():
    assert openai_messages([
        {"role": "system", "content": "be brief", "name": "rules", "extra": 1},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "finish", "arguments": None}}], "reasoning": "..."},
    ]) == [
        {"role": "system", "content": "be brief", "name": "rules"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "finish", "arguments": "{}"}}]},
    ]
