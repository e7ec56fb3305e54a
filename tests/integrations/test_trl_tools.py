"""searchgym games as TRL's environment_factory: the tools TRL discovers, the episodes they
play, and a GRPO step through TRL's real GRPOTrainer and its own tool loop (CPU)."""

import inspect

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from env_helpers import SMALL_WORLD  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402

from searchgym.envs.registration import ENV_SPECS, full_env_id  # noqa: E402
from searchgym.error import ConfigError, SearchGymError, UnknownNameError  # noqa: E402
from searchgym.integrations.trl import ToolEnvironment, tool_dataset, tool_environment  # noqa: E402

WORLD = {"corpus_options": SMALL_WORLD, "max_turns": 3, "top_k": 1}
ANSWER_GAMES = ("SearchR1-v0", "R1Searcher-v0", "RECON-v0", "RSearch-v0")


def trl_tools(environment):
    """The tools TRL finds on an environment object, as GRPOTrainer finds them."""
    return {
        name: getattr(environment, name)
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def same_schema(ours, env):
    """get_json_schema writes neither an empty ``required`` nor ``additionalProperties: false``
    (the env refuses unknown arguments all the same); otherwise the schemas are equal."""
    parameters = dict(env["function"]["parameters"])
    assert parameters.pop("additionalProperties", False) is False
    if not parameters.get("required"):
        parameters.pop("required", None)
    return ours == {**env, "function": {**env["function"], "parameters": parameters}}


def direct_env(env_id, **kwargs):
    return gym.make(full_env_id(env_id), **{**WORLD, "action_format": "tools", **kwargs})


def one_call(name, arguments, i=0):
    return {"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}]}


@pytest.fixture(scope="module")
def rows():
    return tool_dataset("SearchR1-v0", split="dev", limit=3, **WORLD)


# --------------------------------------------------------------------------- what TRL sees
@pytest.mark.parametrize("env_id", sorted(e.removeprefix("searchgym/") for e in ENV_SPECS))
def test_each_game_offers_exactly_its_tools_with_the_envs_schemas(env_id):
    environment = tool_environment(env_id, **WORLD)()
    tools = trl_tools(environment)
    env_tools = environment._env("train").unwrapped.game.tools.tools
    assert list(tools) == sorted(t["function"]["name"] for t in env_tools)
    expected = {"S3-v0": ["finish", "search", "select"]}.get(env_id, ["answer", "search"])
    assert list(tools) == expected
    by_name = {t["function"]["name"]: t for t in env_tools}
    for name, method in tools.items():
        assert same_schema(get_json_schema(method), by_name[name]), (name, get_json_schema(method), by_name[name])
    if env_id == "RSearch-v0":  # the evidence is optional, as in the env
        assert get_json_schema(tools["answer"])["function"]["parameters"]["required"] == ["answer"]


def test_reset_starts_the_rows_episode_and_returns_the_games_prompt(rows):
    environment = tool_environment("SearchR1-v0", **WORLD)()
    row = rows[1]
    assert row["prompt"] == [{"role": "user", "content": ""}] and row["split"] == "dev"
    text = environment.reset(**row)
    env = direct_env("SearchR1-v0", split="dev")
    _, info = env.reset(options={"example_id": row["example_id"]})
    assert environment.episode.example.id == row["example_id"] and row["question"] in text
    # The env's prompt, but for the rule on a reply without a call, which TRL never shows the env.
    assert "a reply without any tool call is taken as the final answer" in info["messages"][0]["content"]
    assert text == info["messages"][0]["content"].replace(
        "a reply without any tool call is taken as the final answer.", "a reply without any tool call ends the episode without an answer."
    )
    # Another row of the same object starts afresh.
    assert environment.reset(**rows[2]) != text and environment.episode.example.id == rows[2]["example_id"]


def test_reset_explains_a_row_it_cannot_play(rows):
    environment = tool_environment("SearchR1-v0", **WORLD)()
    with pytest.raises(ConfigError, match=r"reset expects the row's example_id .*got None; build the dataset with searchgym\.integrations\.trl\.tool_dataset"):
        environment.reset(prompt=[{"role": "user", "content": ""}])
    with pytest.raises(ConfigError, match=r"expects that message to be empty .*got prompt=\[\{'role': 'user', 'content': 'Who\?'\}\]"):
        environment.reset(**{**rows[0], "prompt": [{"role": "user", "content": "Who?"}]})
    with pytest.raises(ConfigError, match=r"expects the id of a question in this env's dataset, got 'nope'"):
        environment.reset(**{**rows[0], "example_id": "nope"})
    with pytest.raises(SearchGymError, match=r"get_reward\(\) was called before reset\(\)"):
        tool_environment("SearchR1-v0", **WORLD)().get_reward()


def test_a_system_message_before_the_empty_user_message_is_kept(rows):
    environment = tool_environment("SearchR1-v0", **WORLD)()
    text = environment.reset(**{**rows[0], "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ""}]})
    assert rows[0]["question"] in text


def test_tool_environment_and_tool_dataset_explain_bad_arguments():
    with pytest.raises(ConfigError, match=r"expects a single-agent env id .*got searchgym/MultiAgentSearcher-v0"):
        tool_environment("MultiAgentSearcher-v0")
    with pytest.raises(ConfigError, match=r"plays the game through tool calls \(action_format='tools'\), got action_format='tags'"):
        tool_environment("SearchR1-v0", action_format="tags", **WORLD)
    with pytest.raises(UnknownNameError, match="Nope-v0"):
        tool_environment("Nope-v0")
    with pytest.raises(ConfigError, match=r"^tool_dataset expects limit to be a positive integer or None, got 0\.$"):
        tool_dataset("SearchR1-v0", limit=0, **WORLD)


# --------------------------------------------------------------------------- the episode
@pytest.mark.parametrize("env_id", ANSWER_GAMES)
def test_calls_play_the_env_one_turn_each_and_the_reward_is_the_envs(env_id, rows):
    penalty = {"reward_options": {"invalid_action_penalty": -0.25}}
    environment = tool_environment(env_id, **WORLD, **penalty)()
    row = rows[0]
    environment.reset(**row)
    env = direct_env(env_id, split="dev", **penalty)
    env.reset(options={"example_id": row["example_id"]})
    answer = env.unwrapped.example.answers[0]
    script = [("search", {"query": row["question"]}), ("search", {"q": "x"}), ("answer", {"answer": answer})]
    total = 0.0
    for i, (name, arguments) in enumerate(script):
        text = getattr(environment, name)(**arguments)
        _, reward, terminated, _, info = env.step(one_call(name, arguments, i))
        total += reward
        if not terminated:
            assert text == info["messages"][-1]["content"]
    assert text == "Answer received. The episode is over."
    bad = environment.episode.info["messages"][4]["content"]
    assert bad.startswith("Error: ") and "query" in bad and bad.endswith(" This bad call costs 0.25 reward.")
    assert environment.get_reward() == pytest.approx(total) and environment.get_reward() == pytest.approx(total)
    summary = environment.episode.summary()
    assert summary["answered"] and not summary["cut"] and summary["num_invalid"] == 1 and summary["num_searches"] == 1
    assert summary["prediction"] == answer
    # Calls after the end change nothing.
    assert environment.search(query="more") == "Error: the episode is over; no tool can be called now."
    assert environment.get_reward() == pytest.approx(total)


def test_a_bad_call_gets_the_envs_error_text_and_penalty(rows):
    """Arguments reach the env as the model wrote them: missing, unknown and wrong-typed
    ones get the env's own error text and its penalty."""
    options = {**WORLD, "max_turns": 5, "reward_options": {"invalid_action_penalty": -0.5}}
    environment = tool_environment("SearchR1-v0", **options)()
    environment.reset(**rows[0])
    env = direct_env("SearchR1-v0", split="dev", **options)
    env.reset(options={"example_id": rows[0]["example_id"]})
    for i, (name, arguments) in enumerate([("search", {"q": "x"}), ("search", {"query": "a", "limit": 3}), ("answer", {"answer": 7})]):
        text = getattr(environment, name)(**arguments)
        _, reward, _, _, info = env.step(one_call(name, arguments, i))
        assert text == info["messages"][-1]["content"] and reward == -0.5
        assert text.startswith("Error: ") and text.endswith(" This bad call costs 0.5 reward.")
    assert environment.episode.summary()["num_invalid"] == 3
    assert environment.get_reward() == pytest.approx(-1.5)  # three penalties; cut with no answer: EM 0


def test_an_open_episode_is_scored_as_the_env_scores_one_cut_at_its_turn_budget(rows):
    # s3: the frozen generator answers from the documents kept so far, whether the env's
    # turn budget or TRL's loop ended the search.
    environment = tool_environment("S3-v0", **WORLD)()
    row = rows[0]
    environment.reset(**row)
    environment.search(query=row["question"])
    environment.select(doc_ids=[1])
    assert not environment.episode.ended
    env = direct_env("S3-v0", split="dev")
    env.reset(options={"example_id": row["example_id"]})
    total = 0.0
    for i, (name, arguments) in enumerate([("search", {"query": row["question"]}), ("select", {"doc_ids": [1]}), ("search", {"query": "last"})]):
        _, reward, _, truncated, info = env.step(one_call(name, arguments, i))
        total += reward
    assert truncated  # the env's turn budget (3): its last search is not run
    assert environment.get_reward() == pytest.approx(total)
    summary = environment.episode.summary()
    assert summary["cut"] and not summary["answered"] and summary["reward_components"] == info["reward_components"]
    assert summary["num_turns"] == 2
    assert environment.finish() == "Error: the episode is over; no tool can be called now."


def test_an_answer_game_cut_before_its_answer_scores_no_answer(rows):
    environment = tool_environment("SearchR1-v0", **WORLD)()
    environment.reset(**rows[0])
    environment.search(query=rows[0]["question"])
    assert environment.get_reward() == 0.0 and environment.episode.summary()["prediction"] is None


def test_the_turn_budget_ends_the_episode_inside_the_loop(rows):
    environment = tool_environment("SearchR1-v0", **{**WORLD, "max_turns": 2})()
    environment.reset(**rows[0])
    assert environment.search(query="one").startswith("Doc 1(Title:")
    assert environment.search(query="two") == "The turn budget is spent: the episode is over."
    assert environment.episode.truncated and environment.get_reward() == 0.0


def test_each_object_plays_its_own_episode(rows):
    factory = tool_environment("SearchR1-v0", **WORLD)
    a, b = factory(), factory()
    a.reset(**rows[0])
    b.reset(**rows[1])
    a.answer(answer="x")
    assert not b.episode.ended and b.episode.example.id == rows[1]["example_id"]
    assert a._env("dev") is not b._env("dev")


def test_tool_dataset_rows():
    data = tool_dataset("S3-v0", split="train", limit=4, **WORLD)
    assert data.column_names == ["prompt", "example_id", "split", "question"] and len(data) == 4
    env = direct_env("S3-v0", split="train")
    assert data["example_id"] == [e.id for e in env.unwrapped.examples[:4]]
    assert all(p == [{"role": "user", "content": ""}] for p in data["prompt"]) and set(data["split"]) == {"train"}


# --------------------------------------------------------------------------- TRL's GRPOTrainer
#: A minimal hermes-style template (ChatML turns, tools in the system turn, calls inside
#: <tool_call></tool_call>, results inside <tool_response></tool_response>), written here.
HERMES_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nCall a function by writing <tool_call>\n{\"name\": <name>, \"arguments\": <object>}\n"
    "</tool_call>. The functions:{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n"
    "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content }}"
    "{% for call in message.tool_calls or [] %}<tool_call>\n{\"name\": {{ call.function.name | tojson }}, \"arguments\": "
    "{{ call.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: How transformers' parse_response reads an assistant turn of that template.
HERMES_RESPONSE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>", "close_pattern": r"</tool_call>\s*", "repeats": True, "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def hermes_tokenizer():
    from transformers import AutoTokenizer

    from searchgym.lm.testing import tiny_model_folder

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_folder()))
    tokenizer.chat_template = HERMES_TEMPLATE
    tokenizer.response_template = HERMES_RESPONSE
    return tokenizer


def forced_calls(tokenizer, texts, base=20.0, step=10.0):
    """``sequence_bias`` that makes the random model write one of ``texts`` each turn: every
    prefix of each text biases its next token, more the longer the prefix (the texts
    share their opening, then the model's own logits pick one)."""
    bias = {}
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        for k in range(1, len(ids) + 1):
            bias[tuple(ids[:k])] = base + step * k
    return [[list(k), v] for k, v in bias.items()]


@pytest.mark.slow
def test_grpo_trains_through_trls_own_tool_loop(tmp_path):
    """GRPOTrainer(environment_factory=tool_environment(...)): TRL renders the tools, parses
    the model's hermes calls, calls the environment's methods, masks their results and adds
    get_reward. The random model is steered (sequence_bias) to write a search or an answer
    call each turn, so episodes answer, or search until the turn budget."""
    from transformers import AutoModelForCausalLM

    from searchgym.lm.testing import tiny_model_folder

    world = {"corpus_options": SMALL_WORLD, "max_turns": 2, "top_k": 1}
    tokenizer = hermes_tokenizer()
    answer = "Stusfondar"  # the gold answer of the first two training questions below, not of the others
    calls = [
        '<tool_call>\n{"name": "search", "arguments": {"query": "Stusfondar"}}\n</tool_call><|im_end|>',
        '<tool_call>\n{"name": "answer", "arguments": {"answer": "Stusfondar"}}\n</tool_call><|im_end|>',
    ]
    data = tool_dataset("SearchR1-v0", split="train", limit=4, **world).select([1, 2, 0, 3])
    env = direct_env("SearchR1-v0", split="train", max_turns=2)
    gold = {e.id: e.answers for e in env.unwrapped.examples}
    assert [answer in gold[i] for i in data["example_id"]] == [True, True, False, False]

    seen = []

    def record(completions, environments, **kwargs):
        seen.append((completions, [e.episode.summary() for e in environments], [e.get_reward() for e in environments]))
        return [0.0] * len(completions)

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_folder()))
    before = [p.detach().clone() for p in model.parameters()]
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2, max_steps=1, learning_rate=1e-2,
        report_to=[], logging_steps=1, save_strategy="no", use_cpu=True, bf16=False, seed=0, temperature=1.0,
        max_completion_length=600, generation_kwargs={"sequence_bias": forced_calls(tokenizer, calls)},
    )
    trainer = trl.GRPOTrainer(
        model=model, processing_class=tokenizer, environment_factory=tool_environment("SearchR1-v0", **world),
        reward_funcs=[record], train_dataset=data, args=args,
    )
    trainer.train()

    (completions, summaries, rewards), = seen
    assert len(completions) == 4 and all(isinstance(e, ToolEnvironment) for e in trainer.environments)
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0
    class_name = type(trainer.environments[0]).__name__
    assert logged[f"rewards/{class_name}/mean"] == pytest.approx(sum(rewards) / 4)
    # Every episode is what a fresh env gives for the same calls, one turn each.
    for messages, summary, reward in zip(completions, summaries, rewards):
        env.reset(options={"example_id": summary["example_id"]})
        total, ended, n = 0.0, False, 0
        for message in messages:
            for call in message.get("tool_calls") or []:
                if ended:
                    break
                _, step_reward, terminated, truncated, info = env.step(one_call(call["function"]["name"], call["function"]["arguments"], n))
                total, ended, n = total + step_reward, terminated or truncated, n + 1
                if not ended:  # the tool message TRL showed is the env's
                    shown = [m for m in messages if m["role"] == "tool"][n - 1]["content"]
                    assert shown == info["messages"][-1]["content"]
        assert ended and reward == pytest.approx(total) and summary["num_turns"] == n
    # Both ways of ending, and a reward that differs inside a group: the update is not zero.
    assert {s["answered"] for s in summaries} == {True, False}
    assert max(rewards) == 1.0 and min(rewards) == 0.0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


# --------------------------------------------------------------------------- after the end (issue 55, item 3)
def test_calls_after_the_end_are_counted_and_change_nothing(rows):
    from searchgym.integrations.trl_tools import EPISODE_OVER

    environment = tool_environment("SearchR1-v0", **WORLD)()
    environment.reset(**rows[0])
    assert environment.answer(answer="x") == "Answer received. The episode is over."
    reward, summary = environment.get_reward(), environment.episode.summary()
    assert [environment.answer(answer=a) for a in ("y", "z", "w", "v")] == [EPISODE_OVER] * 4
    assert environment.search(query="more") == EPISODE_OVER
    assert environment.calls_after_end == 5 and environment.get_reward() == reward
    assert environment.episode.summary() == summary  # one answer recorded, as before the calls
    environment.reset(**rows[1])
    assert environment.calls_after_end == 0


@pytest.mark.slow
def test_trls_loop_keeps_calling_after_the_answer_and_the_reward_is_the_first_answers(tmp_path):
    """TRL 1.16 cannot stop generation from a tool: a model that keeps calling ``answer`` gets
    EPISODE_OVER for every call after the first, and the rollout's reward is the first
    answer's, as a fresh env scores that one call."""
    from transformers import AutoModelForCausalLM

    from searchgym.integrations.trl_tools import EPISODE_OVER
    from searchgym.lm.testing import tiny_model_folder

    world = {"corpus_options": SMALL_WORLD, "max_turns": 3, "top_k": 1}
    tokenizer = hermes_tokenizer()
    calls = ['<tool_call>\n{"name": "answer", "arguments": {"answer": "Stusfondar"}}\n</tool_call><|im_end|>']
    data = tool_dataset("SearchR1-v0", split="train", limit=2, **world)
    seen = []

    def record(completions, environments, **kwargs):
        seen.append((completions, [(e.episode.summary(), e.calls_after_end, e.get_reward()) for e in environments]))
        return [0.0] * len(completions)

    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2, max_steps=1, learning_rate=1e-2,
        report_to=[], logging_steps=1, save_strategy="no", use_cpu=True, bf16=False, seed=0, temperature=1.0,
        max_completion_length=300, max_tool_calling_iterations=3,
        generation_kwargs={"sequence_bias": forced_calls(tokenizer, calls)},
    )
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(str(tiny_model_folder())), processing_class=tokenizer,
        environment_factory=tool_environment("SearchR1-v0", **world), reward_funcs=[record], train_dataset=data, args=args,
    )
    trainer.train()

    (completions, states), = seen
    env = direct_env("SearchR1-v0", split="train")
    after = 0
    for messages, (summary, calls_after_end, reward) in zip(completions, states):
        made = [c for m in messages for c in m.get("tool_calls") or []]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        assert made and all(c["function"]["name"] == "answer" for c in made)
        assert results[1:] == [EPISODE_OVER] * (len(results) - 1) and calls_after_end == len(made) - 1
        assert summary["answered"] and summary["num_turns"] == 1
        env.reset(options={"example_id": summary["example_id"]})
        assert reward == pytest.approx(env.step(one_call("answer", made[0]["function"]["arguments"]))[1])
        after += calls_after_end
    assert after > 0  # the loop did call after the end, so the checks above checked something
