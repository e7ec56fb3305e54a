"""Training through tool calls: the oracle's tool-call play as SFT data, PPO / GRPO /
REINFORCE++ on envs made with action_format="tools", on the tiny random model."""

import copy

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from lm_helpers import rescored_samples  # noqa: E402
from searchgym.agents.tokens import render_chat  # noqa: E402
from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm.chat_templates import CHAT_TEMPLATES, install_chat_template  # noqa: E402
from searchgym.lm.testing import tiny_model_folder, tiny_tokenizer  # noqa: E402
from searchgym.training.args import Args  # noqa: E402
from searchgym.training.batch import collate  # noqa: E402
from searchgym.training.sft import SFTArgs, oracle_trajectories, sft  # noqa: E402
from searchgym.training.trainer import Trainer  # noqa: E402

TOOLS = {"action_format": "tools", "corpus_options": SMALL_WORLD, "top_k": 1}


def hermes_tokenizer():
    tok = copy.deepcopy(tiny_tokenizer())
    install_chat_template(tok, "hermes")
    return tok


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/S3-v0", "searchgym/RSearch-v0"])
def test_oracle_tool_trajectories_are_its_calls_as_the_template_writes_them_with_the_results_masked(env_id):
    tok = hermes_tokenizer()
    trajectories = oracle_trajectories(env_id, tok, env_options=TOOLS, limit=3, num_envs=3)
    assert len(trajectories) == 3
    for t in trajectories:
        assert t.render_mismatch is None  # each step's record was the template's render of the conversation
        generated = [tok.decode(s.token_ids) for s in t.segments if s.generated]
        observed = [tok.decode(s.token_ids) for s in t.segments if not s.generated]
        assert all("<tool_call>\n{\"name\": " in g and g.endswith("</tool_call><|im_end|>") for g in generated)
        assert all(o.startswith("\n<|im_start|>user\n<tool_response>\n") and o.endswith("<|im_start|>assistant\n") for o in observed)
        assert sum(t.loss_mask) == sum(len(s) for s in t.segments if s.generated)
        batch = collate([t])
        assert batch.loss_mask[0].tolist() == ([0] * len(t.prompt_ids) + t.loss_mask)[1:]  # targets: masks shifted by one


def test_sft_through_tool_calls_installs_the_template_and_saves_it_with_the_model(tmp_path):
    args = SFTArgs(
        env_options=dict(TOOLS), model=str(tiny_model_folder()), chat_template="hermes", limit=6, epochs=2, batch_size=3,
        micro_batch_size=3, lr=3e-3, warmup_steps=1, eval_limit=2, max_new_tokens=8, num_envs=3, out=str(tmp_path / "sft"),
        progress=False, threads=1,
    )
    rows = sft(args)
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and rows[-1]["loss"] < rows[0]["loss"]
    assert "eval_reward" in rows[-1]
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(str(tmp_path / "sft" / "final")).chat_template == CHAT_TEMPLATES["hermes"].source
    # Without a template that writes tools the oracle's calls cannot be written for the student.
    with pytest.raises(ConfigError, match=r"^TeacherAgent plays through tool calls, but the chat template of .* does not write the "
                       r"tools' schemas \(tools=\) or the assistant's tool calls: the model would not see the game\. Use one of searchgym's"):
        sft(SFTArgs(**{**vars(args), "chat_template": None, "out": str(tmp_path / "no-template")}))


@pytest.mark.parametrize("algorithm,n", [("ppo", 1), ("grpo", 2), ("reinforce++", 2)])
def test_each_algorithm_trains_on_tool_episodes(tmp_path, algorithm, n):
    trainer = Trainer(Args(
        model=str(tiny_model_folder()), chat_template="hermes", env_options={**TOOLS, "max_turns": 2}, algorithm=algorithm, n=n,
        out=str(tmp_path / "run"), total_steps=1, questions_per_step=2, num_envs=4, max_new_tokens=8, micro_batch_size=2,
        lr=1e-3, save_every=1, progress=False, tensorboard=False, seed=0, threads=1,
    ))
    trainer.build()
    results, _ = trainer.rollout(0)
    env = trainer.envs[0]
    observation, info = env.reset(options={"example_id": results[0].example_id})
    prompt = tuple(trainer.tokenizer.encode(render_chat(trainer.tokenizer, info["messages"], info["tools"], generation_prompt=True), add_special_tokens=False))
    assert results[0].trajectory.prompt_ids == prompt and "<tools>" in trainer.tokenizer.decode(prompt)
    rows = trainer.train()
    assert rows[-1]["step"] == 1 and rows[-1]["episodes"] == 2 * n and rows[-1]["loss"] == rows[-1]["loss"]  # finite, not NaN
    # An update on the oracle's multi-turn tool episodes (their logprobs recomputed by the model) trains only the calls.
    tok = trainer.tokenizer
    oracle = oracle_trajectories("searchgym/SearchR1-v0", tok, env_options=TOOLS, limit=2, num_envs=2)
    samples = rescored_samples(trainer, oracle)
    stats = trainer.update(samples)
    assert stats["logprob_diff_max"] < 1e-3 and stats["grad_norm"] > 0


def test_the_env_reads_the_calls_of_the_template_the_run_installs(tmp_path):
    from searchgym.training.data import env_kwargs, with_tool_parser

    assert with_tool_parser({"action_format": "tools"}, "mistral") == {"action_format": "tools", "tool_parser": "mistral"}
    assert with_tool_parser({"action_format": "tools", "tool_parser": "hermes"}, "llama3")["tool_parser"] == "hermes"
    assert with_tool_parser({}, "llama3") == {}
    args = Args(chat_template="llama3", env_options={"action_format": "tools"})
    assert env_kwargs(args, "train", None, frozen=None)["tool_parser"] == "llama3_json"
    with pytest.raises(Exception, match=r"^Unknown chat template 'hermes3'\. Did you mean 'hermes'\?"):
        Trainer(Args(chat_template="hermes3", out=str(tmp_path / "x")))


def test_draw_record_shades_the_masked_spans(tmp_path):
    from searchgym.training.token_picture import draw_record

    tok = hermes_tokenizer()
    (t,) = oracle_trajectories("searchgym/SearchR1-v0", tok, env_options=TOOLS, limit=1, num_envs=1)
    path = draw_record(t, tok, tmp_path / "record.png", title="one episode")
    assert path.stat().st_size > 20_000
