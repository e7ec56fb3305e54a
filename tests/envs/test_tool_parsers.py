"""Tool calls read from raw text: hermes, Llama 3 JSON, Mistral (both forms), a user's own
parser by name or by callable, and parsers that fail; each on good and broken text."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.envs.tools import parsers
from searchgym.envs.tools.parsers import (
    TOOL_PARSERS, TOOL_WRITERS, ParsedCalls, RawCall, hermes, llama3_json, make_tool_parser, mistral, register_tool_parser,
)
from searchgym.error import ConfigError, UnknownNameError
from tool_helpers import make_env


def calls_of(parsed):
    return [(c.name, c.arguments, c.error) for c in parsed.calls]


# ---------------------------------------------------------------------- hermes
def test_hermes_reads_each_block_and_keeps_the_text_around_them():
    parsed = hermes('I will search.\n<tool_call>\n{"name": "search", "arguments": {"query": "a b"}}\n</tool_call>\n'
                    '<tool_call>{"name": "search", "arguments": {"query": "c"}}</tool_call> Done.')
    assert parsed.content == "I will search.\n\n Done."
    assert calls_of(parsed) == [("search", {"query": "a b"}, None), ("search", {"query": "c"}, None)]


@pytest.mark.parametrize("text, error", [
    ('<tool_call>{"name": "search", "arguments": {"query": }}</tool_call>', "the <tool_call> block holds invalid JSON (Expecting value"),
    ('<tool_call>{"name": "search", "arguments": {"query": "x"}}', "a <tool_call> block is not closed with </tool_call>"),
    ("<tool_call>[1, 2]</tool_call>", 'a tool call must be a JSON object with "name" and "arguments", got an array'),
    ('<tool_call>{"arguments": {}}</tool_call>', 'the tool call has no "name" string'),
    ('<tool_call>{"name": "", "arguments": {}}</tool_call>', 'the tool call has no "name" string'),
    ('<tool_call>{"name": "search", "arguments": [1]}</tool_call>', 'the arguments of "search" must be a JSON object, got an array'),
    ('<tool_call>{"name": "search", "arguments": "{\\"query\\": 1"}</tool_call>', 'the arguments of "search" are invalid JSON'),
    ("<tool_call>" + "[" * 100_000 + "</tool_call>", "the <tool_call> block holds JSON nested too deeply"),
])
def test_hermes_reads_a_broken_block_as_a_broken_call(text, error):
    (call,) = hermes(text).calls
    assert call.error.startswith(error)


def test_hermes_reads_arguments_written_as_a_json_string_and_the_parameters_key():
    assert calls_of(hermes('<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}</tool_call>')) == [
        ("search", {"query": "x"}, None)]
    assert calls_of(hermes('<tool_call>{"name": "search", "parameters": {"query": "x"}}</tool_call>')) == [
        ("search", {"query": "x"}, None)]


def test_hermes_text_without_a_block_is_content():
    assert hermes("Paris </tool_call>") == ParsedCalls("Paris", ())


# ---------------------------------------------------------------------- Llama 3 JSON
def test_llama3_json_reads_one_or_several_calls():
    assert calls_of(llama3_json('{"name": "search", "parameters": {"query": "x"}}')) == [("search", {"query": "x"}, None)]
    parsed = llama3_json('<|python_tag|>{"name": "search", "parameters": {"query": "x"}}; {"name": "answer", "parameters": {"answer": "y"}}')
    assert parsed.content == "" and calls_of(parsed) == [("search", {"query": "x"}, None), ("answer", {"answer": "y"}, None)]


def test_llama3_json_reads_other_text_as_content_and_broken_json_as_a_broken_call():
    assert llama3_json(" Paris is the answer. ") == ParsedCalls("Paris is the answer.", ())
    assert llama3_json("<|python_tag|>print(1)") == ParsedCalls("print(1)", ())
    (call,) = llama3_json('{"name": "search", "parameters": {"query": ').calls
    assert call.error.startswith("the call is invalid JSON")
    first, second = llama3_json('{"name": "search", "parameters": {"query": "x"}} and then').calls
    assert first.error is None and second.error.startswith("the call is invalid JSON")
    (deep,) = llama3_json("{" + '"a":[' * 50_000).calls
    assert deep.error is not None


# ---------------------------------------------------------------------- Mistral
def test_mistral_reads_the_v3_list_form():
    parsed = mistral('Let me look.[TOOL_CALLS] [{"name": "search", "arguments": {"query": "x"}}, '
                     '{"name": "search", "arguments": {"query": "y"}}]')
    assert parsed.content == "Let me look." and calls_of(parsed) == [("search", {"query": "x"}, None), ("search", {"query": "y"}, None)]
    trailing = mistral('[TOOL_CALLS] [{"name": "search", "arguments": {"query": "x"}}]\nextra trailing data')
    assert trailing.content == "extra trailing data" and calls_of(trailing) == [("search", {"query": "x"}, None)]


def test_mistral_reads_the_v11_form_with_or_without_call_ids():
    parsed = mistral('[TOOL_CALLS]search[ARGS]{"query": "x"}[TOOL_CALLS]search[CALL_ID]a1b2c3d4e[ARGS]{"query": "y"}'
                     '[TOOL_CALLS]answer{"answer": "z"}')
    assert calls_of(parsed) == [("search", {"query": "x"}, None), ("search", {"query": "y"}, None), ("answer", {"answer": "z"}, None)]
    assert [c.id for c in parsed.calls] == [None, "a1b2c3d4e", None]


@pytest.mark.parametrize("text, error", [
    ("[TOOL_CALLS] not json at all", "[TOOL_CALLS] is followed by invalid JSON"),
    ('[TOOL_CALLS]search[ARGS]{"query": ', "[TOOL_CALLS] is followed by invalid JSON"),
    ("[TOOL_CALLS]", "[TOOL_CALLS] is followed by no call"),
    ("[TOOL_CALLS][]", "[TOOL_CALLS] is followed by an empty list"),
    ("[TOOL_CALLS][5]", 'a tool call must be a JSON object with "name" and "arguments", got an integer'),
    ("[TOOL_CALLS]search[ARGS][1]", 'the arguments of "search" must be a JSON object, got an array'),
    ("[TOOL_CALLS]" + "[" * 100_000, "[TOOL_CALLS] is followed by JSON nested too deeply"),
])
def test_mistral_reads_broken_calls_as_broken_calls(text, error):
    (call,) = mistral(text).calls
    assert call.error.startswith(error)


def test_mistral_text_without_the_marker_is_content():
    assert mistral("Paris") == ParsedCalls("Paris", ())


# ---------------------------------------------------------------------- every format, both ways
ARGUMENTS = st.dictionaries(st.sampled_from(["query", "answer", "evidence", "doc_ids"]),
                            st.one_of(st.text(max_size=20), st.lists(st.integers(0, 9), max_size=3)), max_size=2)
CALLS = st.lists(st.tuples(st.sampled_from(["search", "answer", "select", "finish"]), ARGUMENTS), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(format=st.sampled_from(sorted(TOOL_WRITERS)), content=st.text(max_size=30), calls=CALLS)
def test_every_format_reads_back_what_its_writer_wrote(format, content, calls):
    if format == "llama3_json":
        content = ""  # a Llama 3.1 JSON turn is its calls alone
    content = content.replace("[TOOL_CALLS]", "").replace("<tool_call>", "").replace("</tool_call>", "").strip()
    if format == "mistral" and content.startswith(("[", "{")):
        content = "x" + content
    parsed = TOOL_PARSERS[format](TOOL_WRITERS[format](content, calls))
    assert [(c.name, c.arguments, c.error) for c in parsed.calls] == [(n, a, None) for n, a in calls]
    assert parsed.content == content.strip()


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200) | st.lists(st.sampled_from(
    ["<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|python_tag|>", "{", "}", "[", "]", '"name"', ":",
     '"search"', '"arguments"', ",", ";", '"x"', "search", " "]), max_size=30).map("".join))
def test_no_parser_raises_on_any_text(text):
    for parse in TOOL_PARSERS.values():
        parsed = parse(text)
        assert isinstance(parsed, ParsedCalls) and isinstance(parsed.content, str)
        assert all(isinstance(c, RawCall) and (c.error is None) == isinstance(c.arguments, dict) for c in parsed.calls)


# ---------------------------------------------------------------------- through the env
def test_the_env_reads_each_builtin_format():
    for name, turn in [
        ("hermes", '<tool_call>{"name": "search", "arguments": {"query": "born city"}}</tool_call>'),
        ("llama3_json", '{"name": "search", "parameters": {"query": "born city"}}'),
        ("mistral", '[TOOL_CALLS][{"name": "search", "arguments": {"query": "born city"}}]'),
        ("mistral", '[TOOL_CALLS]search[ARGS]{"query": "born city"}'),
    ]:
        env = make_env("searchgym/SearchR1-v0", tool_parser=name)
        env.reset(seed=1)
        _, _, _, _, info = env.step(turn)
        assert info["queries"] == ["born city"] and info["num_searches"] == 1 and info["num_invalid"] == 0, name
        assert info["messages"][1]["tool_calls"][0]["function"] == {"name": "search", "arguments": {"query": "born city"}}


def call_lines(text):
    """A user's format: ``CALL name: json`` lines; the rest is content."""
    calls, content = [], []
    for line in text.splitlines():
        if line.startswith("CALL "):
            name, _, arguments = line[5:].partition(":")
            calls.append(parsers.call_from_object({"name": name.strip(), "arguments": arguments.strip()}))
        else:
            content.append(line)
    return ParsedCalls("\n".join(content).strip(), tuple(calls))


@pytest.mark.parametrize("by", ["name", "callable"])
def test_a_users_parser_by_name_or_callable(by):
    if by == "name":
        register_tool_parser("call_lines", call_lines)
    try:
        env = make_env("searchgym/SearchR1-v0", tool_parser="call_lines" if by == "name" else call_lines)
        env.reset(seed=1)
        _, _, _, _, info = env.step('Searching.\nCALL search: {"query": "born city"}\nCALL search: {"query": ')
        assert info["queries"] == ["born city"] and info["num_invalid"] == 1
        assert info["messages"][1]["content"] == "Searching."
        assert 'the arguments of "search" are invalid JSON' in info["messages"][3]["content"]
    finally:
        TOOL_PARSERS.pop("call_lines", None)


def _raising(text):
    raise RuntimeError("my parser is broken")


@pytest.mark.parametrize("parser, error", [
    (_raising, "the tool parser failed on this turn (RuntimeError)"),
    (lambda text: [("search", {"query": text})], "the tool parser returned list, not ParsedCalls of RawCalls"),
    (lambda text: ParsedCalls(text, ("search",)), "the tool parser returned ParsedCalls, not ParsedCalls of RawCalls"),
    (lambda text: ParsedCalls(None, ()), "the tool parser returned ParsedCalls, not ParsedCalls of RawCalls"),
])
def test_a_parser_that_raises_or_returns_garbage_makes_a_bad_call(parser, error):
    env = make_env("searchgym/SearchR1-v0", tool_parser=parser, reward_options={"invalid_action_penalty": -1.0})
    env.reset(seed=1)
    obs, reward, terminated, _, info = env.step("anything")
    assert obs == f"Error: {error}. This bad call costs 1 reward." and reward == -1.0 and not terminated
    assert info["messages"][-1]["role"] == "user"


def test_a_users_parser_may_return_odd_calls_without_breaking_the_env():
    odd = lambda text: ParsedCalls("", (RawCall(["search"], {"query": "x"}), RawCall("search", ["x"]), RawCall("search", None),  # noqa: E731
                                        RawCall(None, error=5)))
    env = make_env("searchgym/SearchR1-v0", tool_parser=odd)
    env.reset(seed=1)
    obs, _, _, _, info = env.step("anything")
    assert info["num_invalid"] == 4 and info["num_searches"] == 0
    assert 'there is no tool "list"' in obs and 'the arguments of "search" must be a JSON object, got an array' in obs


def test_parser_names_and_registration_are_checked():
    with pytest.raises(UnknownNameError, match=r"^Unknown tool parser 'llama3'\. Did you mean 'llama3_json'\?"):
        make_tool_parser("llama3")
    with pytest.raises(ConfigError, match=r"^register_tool_parser expects a name \(a non-empty str\) and a callable text -> "
                                          r"ParsedCalls, got '' and function\.$"):
        register_tool_parser("", call_lines)
    with pytest.raises(ConfigError, match=r"got 'x' and str\.$"):
        register_tool_parser("x", "not a parser")
    assert make_tool_parser(call_lines) is call_lines and make_tool_parser("hermes") is hermes
