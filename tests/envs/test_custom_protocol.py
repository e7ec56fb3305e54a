"""A protocol of the user's own, written as a user would with the public API only: AutoRefine's
``<refine>`` block (a new action kind) over Search-R1's grammar, in tags and as a tool, with its
own prompt, the exported tag helpers, and a parser that reads the previous observation."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import searchgym  # noqa: F401  (registers the ids)
from searchgym.envs import search_env
from searchgym.envs.protocols import (
    BUILT_IN_KINDS, Action, Answer, Invalid, ParsedTurn, Search, SearchR1Protocol, ToolSpec, cut_at_stop, find_block,
    find_blocks, first_of, search_or_answer, strip_blocks,
)
from searchgym.error import ConfigError, SearchGymError

SMALL_WORLD = {"seed": 7, "num_passages": 400}
PENALTY = -0.5


# ---------------------------------------------------------------- the user's protocol
@dataclass(frozen=True)
class Refine(Action):
    """AutoRefine's refinement: what the agent distilled from the documents it just read."""

    text: str
    kind = "refine"


@dataclass(frozen=True)
class GiveUp(Action):
    """A kind of the user's own that ends the episode without an answer."""

    kind = "give_up"
    ends_episode = True


def follows_documents(previous_observation: str | None) -> bool:
    # Search-R1 shows documents as "\n\n<information>…"; the prompt only names the tag.
    return previous_observation is not None and "\n\n<information>" in previous_observation


class RefineProtocol(SearchR1Protocol):
    """Search-R1's grammar plus ``<refine> … </refine>``, allowed only right after retrieved documents."""

    name = "autorefine"
    PROMPT = ("Answer the question. Search with <search> query </search>; after each <information> block, refine "
              "what it says in <refine> … </refine>; answer in <answer> … </answer>. Question: ")

    def __init__(self):
        super().__init__()
        self.seen: list[str | None] = []  # the previous observations parse_actions received (for the tests)

    def prompt(self, example, docs=None):
        return f"{self.PROMPT}{example.question}\n"

    def parse_actions(self, text, previous_observation=None):
        self.seen.append(previous_observation)
        if "<give_up/>" in text:
            return (GiveUp(),), True
        refines = find_blocks(text, "<refine>", "</refine>")
        if refines and not follows_documents(previous_observation):
            return (Invalid("a <refine> block must follow retrieved documents"),), False
        action, _ = search_or_answer(text)
        return (*(Refine(r) for r in refines[:1] if r), action), not isinstance(action, Invalid)

    def act(self, action, game):
        if isinstance(action, Refine):
            return f"\n<refined>{len(action.text.split())} words kept</refined>\n"
        return None

    def write(self, actions, thought=None):
        acts = list(actions)
        head = f"<think> {thought} </think>\n" if thought else ""
        if acts and isinstance(acts[0], Refine):
            head += f"<refine> {acts.pop(0).text} </refine>\n"
        return head + super().write(acts)

    def extra_tools(self):
        def refine(arguments, previous_observation=None):
            if not previous_observation or "Doc 1" not in previous_observation:
                return Invalid("refine must follow search results")
            return Refine(arguments["text"])

        return (ToolSpec("refine", "Distill what the latest search results say about the question.",
                         {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                         action=Refine, to_action=refine),)

    def tool_messages(self, example, docs=None):
        return [{"role": "system", "content": "You are AutoRefine. Search, refine the results, then answer."},
                {"role": "user", "content": example.question}]


# ---------------------------------------------------------------- envs
@pytest.fixture(scope="module")
def world():
    base = search_env(gym.make("searchgym/SearchR1-v0", corpus_options=SMALL_WORLD))
    return {"corpus": base.corpus, "dataset": base.examples, "retriever": base.retriever}


def make(world, action_format="tags", **kwargs):
    kwargs.setdefault("protocol", RefineProtocol())
    return gym.make("searchgym/SearchR1-v0", action_format=action_format, reward_options={"invalid_action_penalty": PENALTY},
                    **world, **kwargs)


def tool_call(name, arguments, i=0):
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


def message(*calls, content=""):
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


# ---------------------------------------------------------------- action kinds
def test_action_kinds_are_class_attributes_and_the_built_in_kinds_are_unchanged():
    assert {k: c.__name__ for k, c in BUILT_IN_KINDS.items()} == {
        "search": "Search", "select": "Select", "evidence": "Evidence", "answer": "Answer", "complete": "Complete",
        "invalid": "Invalid"}
    assert ParsedTurn((Refine("x"), Search("q")), "").kinds == ("refine", "search")
    assert (Answer("a").ends_episode, Search("q").ends_episode, Refine("x").ends_episode, GiveUp().ends_episode) == \
        (True, False, False, True)


def test_an_action_class_without_a_kind_or_with_a_built_in_one_is_refused_when_defined():
    with pytest.raises(ConfigError) as e:
        class Nameless(Action):
            pass
    assert str(e.value) == ("Action subclass Nameless expects a class attribute kind, a non-empty name such as 'refine', "
                            "got None; add kind = 'nameless' to the class.")
    with pytest.raises(ConfigError) as e:
        class Impostor(Action):
            kind = "answer"
    assert str(e.value) == ("Action subclass Impostor expects a kind of its own, got the built-in kind 'answer' (of Answer); "
                            "name it differently, or subclass Answer.")

    class WebSearch(Search):  # a subclass of a built-in keeps its kind and is played as it
        pass

    assert WebSearch("q").kind == "search"


def test_tag_helpers_are_public_and_read_tags_as_the_built_in_grammars_do():
    assert find_blocks("<r> a </r> x <r>b</r> <r>open", "<r>", "</r>") == ["a", "b"]
    assert find_blocks("<r><r> in </r>", "<r>", "</r>") == ["<r> in"]
    assert find_block("<r> a </r><r>b</r>", "<r>", "</r>") == "a"
    assert cut_at_stop("<search> q </search> more", ("</search>",)) == ("<search> q </search>", 5)
    assert strip_blocks("a<information>forged</information>b</information>", (("<information>", "</information>"),)) == ("ab", True)
    assert first_of("x <answer> <search>", ("<search>", "<answer>")) == "<answer>"
    assert search_or_answer("<think>t</think><answer> Paris </answer>") == (Answer("Paris"), 16)


# ---------------------------------------------------------------- tags
def test_a_refine_turn_is_played_recorded_and_shown(world):
    env = make(world)
    prompt, _ = env.reset(seed=0)
    assert prompt.startswith(RefineProtocol.PROMPT)
    protocol = search_env(env).protocol
    obs, reward, terminated, _, info = env.step("<search> founder of Brupromusk Motors </search>")
    assert info["action_kinds"] == ("search",) and "<information>" in obs and protocol.seen == [prompt]
    obs2, reward, terminated, _, info = env.step("<refine> the founder is named in Doc 1 </refine>\n<search> founder university </search>")
    assert protocol.seen[-1] == obs  # parse_actions received the observation of the previous step
    assert info["action_kinds"] == ("refine", "search") and info["num_invalid"] == 0 and reward == 0.0
    assert obs2.startswith("\n<refined>7 words kept</refined>\n") and "<information>" in obs2
    _, _, terminated, _, info = env.step("<answer> nowhere </answer>")
    assert terminated and search_env(env).game.turns[1][1] == obs2


def test_a_refine_that_does_not_follow_documents_is_an_invalid_turn_with_feedback(world):
    env = make(world)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("<refine> nothing read yet </refine><search> q </search>")
    assert info["action_kinds"] == ("invalid",) and info["invalid_reason"] == "a <refine> block must follow retrieved documents"
    assert (reward, terminated, info["num_invalid"]) == (PENALTY, False, 1)
    assert obs == search_env(env).protocol.invalid_feedback()


def test_an_ending_kind_of_the_users_own_ends_the_episode_without_an_answer(world):
    env = make(world)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("<give_up/>")
    assert (terminated, truncated, info["action_kinds"], info["answer"]) == (True, False, ("give_up",), None)
    assert reward == 0.0  # an episode without an answer earns what an honest wrong answer earns, no more


def test_a_failing_act_is_a_typed_error_naming_the_protocol_and_the_turn_is_undone(world):
    class Broken(RefineProtocol):
        def act(self, action, game):
            return 42

    env = make(world, protocol=Broken())
    env.reset(seed=0)
    env.step("<search> q </search>")
    with pytest.raises(SearchGymError) as e:
        env.step("<refine> r </refine><search> q </search>")
    assert str(e.value) == "Broken.act expects to return the text to show after a 'refine' action (a str) or None, got int."
    assert search_env(env).game.turn == 1  # the failed turn spent nothing

    class Raising(RefineProtocol):
        def act(self, action, game):
            raise KeyError("no such note")

    env = make(world, protocol=Raising())
    env.reset(seed=0)
    env.step("<search> q </search>")
    with pytest.raises(SearchGymError) as e:
        env.step("<refine> r </refine><search> q </search>")
    assert str(e.value) == ("Raising.act failed on a 'refine' action (KeyError: 'no such note'); fix the protocol's act() "
                            "(it must return the text to show, or None).")


def test_a_parser_returning_something_that_is_not_an_action_is_an_invalid_turn(world):
    class Sloppy(RefineProtocol):
        def parse_actions(self, text, previous_observation=None):
            return ("search for this",), True

    env = make(world, protocol=Sloppy())
    env.reset(seed=0)
    _, reward, _, _, info = env.step("<search> q </search>")
    assert info["invalid_reason"] == "the autorefine parser returned str, not an Action" and reward == PENALTY


HOSTILE = st.one_of(
    st.sampled_from(["", "<refine>", "</refine>", "<refine><refine>x</refine></refine>", "<search>", "</search>",
                     "<answer>", "<information>x</information>", "<give_up", "<refine>" * 3000]),
    st.lists(st.sampled_from(["<refine>", "</refine>", "<search>", "</search>", "<answer>", "</answer>", "<information>",
                              " q ", "\x00", "\ud800"]), max_size=14).map("".join),
    st.text(max_size=40),
)


@settings(max_examples=60, deadline=None)
@given(turns=st.lists(HOSTILE, min_size=1, max_size=4))
def test_hostile_turns_never_raise(world, turns):
    env = make(world)
    env.reset(seed=0)
    for text in turns:
        _, reward, terminated, truncated, info = env.step(text)
        assert isinstance(reward, float) and all(isinstance(k, str) for k in info["action_kinds"])
        if terminated or truncated:
            break


# ---------------------------------------------------------------- tools
def test_the_protocols_tool_and_prompt_are_offered_in_tool_mode(world):
    env = make(world, "tools")
    prompt, info = env.reset(seed=0)
    question = search_env(env).example.question
    assert info["prompt_messages"] == [
        {"role": "system", "content": "You are AutoRefine. Search, refine the results, then answer."},
        {"role": "user", "content": question}]
    assert prompt == question
    assert [t["function"]["name"] for t in info["tools"]] == ["search", "answer", "refine"]
    assert info["tools"][2]["function"]["parameters"] == {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False}


def test_a_refine_call_is_played_with_its_result_as_the_tool_message(world):
    env = make(world, "tools")
    env.reset(seed=0)
    env.step(message(tool_call("search", {"query": "Brupromusk Motors founder"})))
    obs, reward, _, _, info = env.step(message(tool_call("refine", {"text": "the founder is in Doc 1"}, 1),
                                               tool_call("search", {"query": "founder university"}, 2)))
    assert info["action_kinds"] == ("refine", "search") and reward == 0.0 and info["num_invalid"] == 0
    replies = info["messages"][-2:]
    assert replies[0] == {"role": "tool", "tool_call_id": "c1", "name": "refine", "content": "<refined>6 words kept</refined>"}
    assert replies[1]["name"] == "search" and "Doc 1" in replies[1]["content"]


@pytest.mark.parametrize("arguments, reason", [
    ({"txt": "x"}, 'refine(text: string) is missing "text"'),
    ({"text": 3}, "refine expects text to be a string, got an integer"),
    ({"text": "x", "more": 1}, 'refine(text: string) got unknown argument "more"'),
    ("{not json", None),
])
def test_a_malformed_refine_call_is_an_invalid_turn_with_feedback(world, arguments, reason):
    env = make(world, "tools")
    env.reset(seed=0)
    env.step(message(tool_call("search", {"query": "q"})))
    obs, reward, terminated, _, info = env.step(message(tool_call("refine", arguments, 1)))
    assert (info["action_kinds"], reward, terminated, info["num_invalid"]) == (("invalid",), PENALTY, False, 1)
    if reason is not None:
        assert info["invalid_reason"] == reason
        assert obs == f"Error: {reason}. This bad call costs 0.5 reward."


def test_a_refine_call_before_any_results_is_refused_by_its_tool_spec(world):
    env = make(world, "tools")
    env.reset(seed=0)
    obs, reward, _, _, info = env.step(message(tool_call("refine", {"text": "x"})))
    assert info["invalid_reason"] == "refine must follow search results" and reward == PENALTY
    assert obs == "Error: refine must follow search results. This bad call costs 0.5 reward."


def test_a_tool_spec_whose_to_action_raises_makes_a_bad_call(world):
    class Fragile(RefineProtocol):
        def extra_tools(self):
            def boom(arguments):
                raise ValueError("cannot refine that")
            return (ToolSpec("refine", "Refine.", {"type": "object", "properties": {"text": {"type": "string"}},
                                                   "required": ["text"]}, to_action=boom),)

    env = make(world, "tools", protocol=Fragile())
    env.reset(seed=0)
    _, reward, _, _, info = env.step(message(tool_call("refine", {"text": "x"})))
    assert info["invalid_reason"] == "refine could not take these arguments (ValueError: cannot refine that)"
    assert reward == PENALTY


def test_the_surface_writes_the_protocols_own_action_as_its_tool_call(world):
    env = make(world, "tools")
    surface = search_env(env).game.tools
    assert surface.write([Refine("kept"), Search("q")])["tool_calls"] == [
        {"id": "call_0_0", "type": "function", "function": {"name": "refine", "arguments": {"text": "kept"}}},
        {"id": "call_0_1", "type": "function", "function": {"name": "search", "arguments": {"query": "q"}}}]


@settings(max_examples=40, deadline=None)
@given(arguments=st.one_of(st.none(), st.text(max_size=20), st.dictionaries(st.text(max_size=5), st.one_of(
    st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3)), max_size=3)))
def test_hostile_refine_calls_never_raise(world, arguments):
    env = make(world, "tools")
    env.reset(seed=0)
    env.step(message(tool_call("search", {"query": "q"})))
    _, _, _, _, info = env.step(message(tool_call("refine", arguments)))
    assert info["action_kinds"] in (("refine",), ("invalid",))


@pytest.mark.parametrize("spec, error", [
    (lambda: ToolSpec("re fine", "x", {"type": "object"}, action=Refine),
     "ToolSpec expects name to be a function name (letters, digits, _ and -, at most 64, not starting with a digit), "
     "got 're fine'."),
    (lambda: ToolSpec("refine", "x", {"type": "object", "properties": {"text": {"type": "str"}}}, action=Refine),
     "ToolSpec 'refine' expects each property to be {'type': one of string, integer, number, boolean, array, object}, "
     "got 'text': {'type': 'str'}."),
    (lambda: ToolSpec("refine", "x", {"type": "object", "properties": {}, "required": ["text"]}, action=Refine),
     "ToolSpec 'refine' expects parameters['required'] to be a list of its properties (none), got ['text']."),
    (lambda: ToolSpec("refine", "x", {"type": "object"}),
     "ToolSpec 'refine' expects action (the action class a call makes) or to_action (arguments -> action), got neither."),
    (lambda: ToolSpec("refine", "x", {"type": "object", "properties": {"txt": {"type": "string"}}}, action=Refine),
     "ToolSpec 'refine' expects its properties to be fields of Refine (text) and to require text, got properties "
     "['txt'] and required []; match them, or pass to_action."),
])
def test_a_bad_tool_spec_is_refused_when_built(spec, error):
    with pytest.raises(ConfigError) as e:
        spec()
    assert str(e.value) == error


def test_a_tool_named_as_a_built_in_one_or_bad_tool_messages_are_refused(world):
    class Clash(RefineProtocol):
        def extra_tools(self):
            return (ToolSpec("search", "x", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                             action=Refine),)

    with pytest.raises(ConfigError) as e:
        make(world, "tools", protocol=Clash())
    assert str(e.value) == ("Clash.extra_tools expects names of its own, got 'search' twice or as a built-in tool "
                            "(answer, search); rename it (an 'answer' of its own makes an Answer subclass).")

    class NoUser(RefineProtocol):
        def tool_messages(self, example, docs=None):
            return [{"role": "system", "content": "only a system message"}]

    env = make(world, "tools", protocol=NoUser())
    with pytest.raises(ConfigError) as e:
        env.reset(seed=0)
    assert str(e.value).startswith("NoUser.tool_messages expects a list of chat messages ({'role': 'system' | 'user' | "
                                   "'assistant', 'content': str}) ending with the user's, or None for searchgym's tool prompt")


def test_the_default_tool_prompt_lists_the_protocols_own_tools(world):
    class DefaultPrompt(RefineProtocol):
        def tool_messages(self, example, docs=None):
            return None

    _, info = make(world, "tools", protocol=DefaultPrompt()).reset(seed=0)
    text = info["prompt_messages"][0]["content"]
    assert "You can also call these tools. refine: Distill what the latest search results say about the question." in text


# ---------------------------------------------------------------- grounding
def test_text_an_act_echoes_beside_documents_is_never_quotable_evidence(world):
    """A protocol's own action that echoes the agent's words must not ground R-Search's evidence:
    the game keeps only the documents as shown for the recipe's grounding."""
    from searchgym.envs.protocols import RSearchProtocol

    @dataclass(frozen=True)
    class Note(Action):
        text: str
        kind = "note"

    class Echo(RSearchProtocol):
        def parse_actions(self, text):
            note = find_block(text, "<note>", "</note>")
            actions, ok = super().parse_actions(text)
            return ((Note(note), *actions) if note else actions), ok

        def act(self, action, game):
            return f"\n{action.text}\n"

    env = gym.make("searchgym/RSearch-v0", protocol=Echo(), **world)
    env.reset(seed=0)
    env.step("<note>Paris is the answer to everything.</note><search> q </search>")
    episode = search_env(env).game.record()
    assert episode.observations and all("Paris is the answer" not in o for o in episode.observations)


# ---------------------------------------------------------------- a protocol from scratch: the contract
def test_an_incomplete_protocol_is_refused_by_name_listing_what_it_leaves_out(tmp_path, monkeypatch):
    from searchgym.envs.protocols import OPTIONAL, REQUIRED, Protocol, make_protocol, protocol_source

    assert REQUIRED == ("name", "prompt", "parse_actions", "wrap_information", "invalid_feedback", "write")
    assert set(Protocol.__abstractmethods__) == set(REQUIRED) - {"name"}
    assert all(callable(getattr(Protocol, m, None)) or hasattr(Protocol, m) for m in OPTIONAL)

    (tmp_path / "half_protocol_t.py").write_text(
        "from searchgym.envs.protocols import Answer, Protocol\n\n\n"
        "class Half(Protocol):\n"
        "    def prompt(self, example, docs=None):\n"
        "        return example.question\n\n"
        "    def parse_actions(self, text):\n"
        "        return (Answer(text),), True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "half_protocol_t", raising=False)
    message = (
        r"^The protocol 'half_protocol_t:Half' \(half_protocol_t:Half\) does not define name \(a class attribute: the protocol's "
        r"name\), wrap_information\(text\), invalid_feedback\(\), write\(actions, thought=None\): a Protocol subclass defines "
        r"name, prompt, parse_actions, wrap_information, invalid_feedback, write \(.*'A protocol from scratch'\)\.$"
    )
    for call in (lambda: protocol_source("half_protocol_t:Half"), lambda: make_protocol("half_protocol_t:Half"),
                 lambda: gym.make("searchgym/SearchR1-v0", protocol="half_protocol_t:Half", corpus_options=SMALL_WORLD)):
        with pytest.raises(ConfigError, match=message):
            call()
    from half_protocol_t import Half

    with pytest.raises(ConfigError, match=r"^The protocol half_protocol_t:Half does not define name .*write\(actions, thought=None\):"):
        gym.make("searchgym/SearchR1-v0", protocol=Half, corpus_options=SMALL_WORLD)
    sys.modules.pop("half_protocol_t", None)


def test_every_built_in_protocol_meets_the_contract():
    from searchgym.envs.protocols import PROTOCOLS, check_protocol_class

    for cls in PROTOCOLS.values():
        check_protocol_class(cls)
