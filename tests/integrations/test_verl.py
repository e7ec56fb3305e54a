"""searchgym's verl agent loop, run by verl's own code on CPU (``make test-verl``, in .venv-verl).

verl's ``AgentLoopManager`` / ``AgentLoopWorker`` instantiate the loop from verl's composed
trainer config, verl's ``RLHFDataset`` reads the prepared parquet, and generation goes
through verl's ``LLMServerClient`` and load balancer (Ray actors) to a
``LanguageModelServer`` actor holding a real transformers model (the tiny random Llama) or
searchgym's scripted LM. Each episode is then replayed in a fresh env from the returned
tokens: the observation ids, the mask, the reward and the logprobs must be what the env
and the model give.

Not run here (they need GPUs): verl's vLLM/SGLang rollout servers, the FSDP actor, critic
and reference workers, weight sync and the PPO/GRPO update (``verl.trainer.main_ppo``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl lives in .venv-verl: make test-verl")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.router import get_router_handle  # noqa: E402

import searchgym  # noqa: E402,F401
from searchgym.agents.tokens import encode_text, prompt_ids  # noqa: E402
from searchgym.corpora.registry import load_dataset  # noqa: E402
from searchgym.corpora.types import QAExample  # noqa: E402
from searchgym.envs.registration import ENV_SPECS, GAME_ENV_SPECS, ROLE_ENV_SPECS  # noqa: E402
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError  # noqa: E402
from searchgym.integrations.verl.agent_loop import REWARD_INFO_KEYS, action_text  # noqa: E402
from searchgym.integrations.verl.data import example_from_row, read_examples, read_parquet, verl_rows, write_parquet  # noqa: E402
from searchgym.integrations.verl.server import LanguageModelServer  # noqa: E402
from searchgym.lm.scripted import ScriptedLM  # noqa: E402
from searchgym.lm.testing import tiny_model_folder, tiny_tokenizer  # noqa: E402

# The scripted policy below travels to the server actor by value (this test module is not
# importable inside Ray's worker processes).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

ENV_ID = "searchgym/SearchR1-v0"
PROMPT_LENGTH = 512
RESPONSE_LENGTH = 160
ROOT = Path(__file__).resolve().parents[2]


def _exact(text: str) -> str:
    """A pattern matching the whole message ``text``."""
    return f"^{re.escape(text)}$"


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def model_path() -> str:
    return str(tiny_model_folder())


def verl_config(model_path: str, loop_file: Path, **overrides: object):
    """verl's own trainer config (ppo_trainer.yaml composed by hydra) for a CPU rollout."""
    import verl

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    settings = {
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.rollout.name": "vllm",  # verl's default server kind; the server here is ours
        "actor_rollout_ref.rollout.prompt_length": PROMPT_LENGTH,
        "actor_rollout_ref.rollout.response_length": RESPONSE_LENGTH,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(loop_file),
        "data.max_prompt_length": PROMPT_LENGTH,
        "data.max_response_length": RESPONSE_LENGTH,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 4,
        **overrides,
    }
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=[f"{k}={v}" for k, v in settings.items()])


def loop_file(tmp_path: Path, env_id: str | None = None, max_tokens_per_turn: int | None = None, env_kwargs: dict | None = None) -> Path:
    path = tmp_path / f"agent_loop_{(env_id or 'rows').replace('/', '_')}.yaml"
    OmegaConf.save(
        OmegaConf.create([{
            "name": "searchgym",
            "_target_": "searchgym.integrations.verl.agent_loop.SearchGymAgentLoop",
            "env_id": env_id,
            "env_kwargs": env_kwargs or {},
            "max_tokens_per_turn": max_tokens_per_turn,
        }]),
        path,
    )
    return path


@pytest.fixture(scope="module")
def ray_session():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
    )
    yield
    ray.shutdown()


def server_client(config, server: LanguageModelServer | None = None, **server_options: object) -> LLMServerClient:
    """verl's client and load balancer in front of one LanguageModelServer actor."""
    actor = ray.remote(LanguageModelServer).remote(**server_options) if server is None else server
    return LLMServerClient(config, load_balancer_handle=get_router_handle(servers={"cpu-server-0": actor}))


def verl_batch(config, parquet: Path) -> DataProto:
    """The rows as verl's trainer batches them: RLHFDataset, collate_fn, DataProto."""
    tokenizer = omega_conf_to_dataclass(config.actor_rollout_ref.model).tokenizer
    dataset = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=config.data, processor=None)
    return DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))


def episodes(output: DataProto) -> list[dict]:
    """Unpadded prompt / response / mask / logprobs / reward of each sample of verl's batch."""
    batch = output.batch
    width = batch["prompts"].shape[1]
    out = []
    for i in range(len(output)):
        attention = batch["attention_mask"][i]
        prompt_len = int(attention[:width].sum())
        response_len = int(attention[width:].sum())
        out.append({
            "prompt": batch["prompts"][i, width - prompt_len :].tolist(),
            "response": batch["responses"][i, :response_len].tolist(),
            "mask": batch["response_mask"][i, :response_len].tolist(),
            "mask_padding": batch["response_mask"][i, response_len:].tolist(),
            "logprobs": batch["rollout_log_probs"][i, :response_len].tolist() if "rollout_log_probs" in batch.keys() else None,
            "reward": float(batch["rm_scores"][i].sum()),
            "reward_at": int(batch["rm_scores"][i].nonzero().flatten()[-1]) if batch["rm_scores"][i].any() else None,
            "turns": list(output.non_tensor_batch["searchgym_turns"][i]),
            "cut": bool(output.non_tensor_batch["cut_by_length"][i]),
            "score": float(output.non_tensor_batch["score"][i]),
            "row": {k: output.non_tensor_batch[k][i] for k in ("data_source", "prompt", "reward_model", "extra_info")},
        })
    return out


def replay(episode: dict, tokenizer, budget: int = RESPONSE_LENGTH, env_id: str = ENV_ID, **env_kwargs: object) -> float:
    """Plays the episode's sampled turns again in a fresh env and checks every token: the
    prompt, the observation ids (mask 0) and the sampled ids (mask 1), up to the response
    budget when the episode was cut by it. Returns the reward."""
    env = gym.make(env_id, **env_kwargs)
    example = example_from_row(episode["row"])
    prompt, info = env.reset(options={"example": example})
    protocol = env.unwrapped.protocol
    assert episode["prompt"] == list(prompt_ids(tokenizer, prompt, info, chat=protocol.uses_chat_template))
    response, mask = episode["response"], episode["mask"]
    total, pos, full, ended = 0.0, 0, 0, False
    for turn in episode["turns"]:
        generated = response[pos : pos + turn["generated"]]
        assert mask[pos : pos + turn["generated"]] == [1] * turn["generated"]
        observation, reward, terminated, truncated, info = env.step(action_text(tokenizer, generated, protocol.stop_strings))
        total += reward
        ended = terminated or truncated
        pos += turn["generated"]
        full += turn["generated"] + len(encode_text(tokenizer, observation))
        obs_ids = list(encode_text(tokenizer, observation))[: len(response) - pos]
        assert response[pos : pos + len(obs_ids)] == obs_ids
        assert mask[pos : pos + len(obs_ids)] == [0] * len(obs_ids)
        pos += len(obs_ids)
    assert pos == len(response) == min(full, budget)
    # Cut: the budget ran out before the episode ended, or its last observation did not fit.
    assert episode["cut"] == (not ended or full > budget)
    assert set(episode["mask_padding"]) <= {0}
    return total


# --------------------------------------------------------------------------- a real model, verl's manager
def test_verl_agent_loop_manager_plays_the_env_with_a_transformers_model(ray_session, model_path, tmp_path):
    """AgentLoopManager -> AgentLoopWorker (a Ray actor that imports the loop from the
    agent-loop file) -> LLMServerClient -> load balancer -> the tiny Llama."""
    # Short turns, so that each episode has several turns and observations within the budget.
    config = verl_config(model_path, loop_file(tmp_path, max_tokens_per_turn=24), **{"actor_rollout_ref.rollout.response_length": 384})
    parquet = write_parquet(verl_rows(ENV_ID, split="dev", limit=3), tmp_path / "dev.parquet")
    client = server_client(config, model=model_path, max_model_len=2048)
    manager = AgentLoopManager.create(config, client)
    output = manager.generate_sequences(verl_batch(config, parquet))

    assert set(output.meta_info["reward_extra_keys"]) == set(REWARD_INFO_KEYS)
    tokenizer = tiny_tokenizer()
    played = episodes(output)
    assert len(played) == 3
    for episode in played:
        assert replay(episode, tokenizer, budget=384) == pytest.approx(episode["reward"]) == pytest.approx(episode["score"])
    # The random model's turns are malformed: the env answers each with feedback text,
    # so the episodes do have observation tokens to mask.
    assert any(0 in e["mask"] for e in played) and all(1 in e["mask"] for e in played)

    # The logprobs are the model's own at each sampled token (temperature 1: its log-softmax).
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    for episode in played:
        ids = torch.tensor([episode["prompt"] + episode["response"]])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)  # [T-1, V]
        start = len(episode["prompt"])
        own = logp[start - 1 :].gather(1, ids[0, start:, None])[:, 0]  # [R]
        sampled = torch.tensor(episode["mask"], dtype=torch.bool)
        assert torch.allclose(torch.tensor(episode["logprobs"])[sampled], own[sampled], atol=2e-3)
        assert torch.tensor(episode["logprobs"])[~sampled].abs().sum() == 0.0

    # verl's own PPO policy loss over verl's padded batch (advantage 1 on every token, old
    # logprobs = the rollout's): its gradient reaches the sampled tokens only.
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    batch = output.batch
    width = batch["prompts"].shape[1]
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]).logits
    log_prob = torch.log_softmax(logits[:, width - 1 : -1].float(), dim=-1).gather(2, batch["responses"][..., None])[..., 0]  # [B, R]
    log_prob.retain_grad()
    mask = batch["response_mask"].bool()  # [B, R]
    loss, _ = get_policy_loss_fn("vanilla")(
        old_log_prob=batch["rollout_log_probs"], log_prob=log_prob, advantages=torch.ones_like(log_prob),
        response_mask=mask, loss_agg_mode="token-mean", config=omega_conf_to_dataclass(config.actor_rollout_ref.actor),
    )
    loss.backward()
    assert (log_prob.grad[~mask] == 0).all() and (log_prob.grad[mask] != 0).all()


# --------------------------------------------------------------------------- every registered env
@pytest.fixture(scope="module")
def long_context_model(tmp_path_factory) -> str:
    """The tiny random Llama with a 4096-token context: s3's first prompt holds documents,
    which are long in the tiny tokenizer's few hundred tokens."""
    from searchgym.lm.testing import tiny_causal_lm

    folder = tmp_path_factory.mktemp("tiny-4k")
    tiny_causal_lm(0, hidden_size=128, num_attention_heads=2, context=4096).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def long_context_server(ray_session, long_context_model):
    return ray.remote(LanguageModelServer).remote(model=long_context_model, max_model_len=4096)


def game_world(env_id: str, tmp_path: Path) -> dict:
    """``gym.make`` arguments a game of ``GAME_ENV_SPECS`` needs here (none for the others):
    the deep-research game plays over the small long-document world of tests/deepresearch
    (its corpus and a FlashRAG file of its questions), with short snippets and pages so that
    its tool-calling prompt and a turn fit the tiny tokenizer's budget."""
    if env_id != "searchgym/DeepResearch-v0":
        return {}
    from deepresearch.small_world import world

    corpus, questions = world(tmp_path)
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps({"id": q.id, "question": q.question, "golden_answers": list(q.answers),
                                           "metadata": q.metadata}) + "\n" for q in questions))
    return {"corpus": str(corpus), "dataset": str(dataset), "top_k": 1, "protocol_options": {"snippet_words": 30, "page_words": 100}}


@pytest.mark.parametrize("env_id", [*ENV_SPECS, *GAME_ENV_SPECS, *ROLE_ENV_SPECS])
def test_every_registered_env_plays_through_verls_worker(env_id, long_context_model, long_context_server, tmp_path):
    world = game_world(env_id, tmp_path)
    parquet = write_parquet(verl_rows(env_id, split="dev", limit=1, **world), tmp_path / "row.parquet")
    config = verl_config(long_context_model, loop_file(tmp_path, max_tokens_per_turn=16, env_kwargs=world), **{
        "data.max_prompt_length": 3072, "actor_rollout_ref.rollout.prompt_length": 3072,
        "actor_rollout_ref.rollout.response_length": 256,
    })
    output = run_worker(config, server_client(config, long_context_server), parquet)
    (episode,) = episodes(output)
    assert replay(episode, tiny_tokenizer(), budget=256, env_id=env_id, **world) == pytest.approx(episode["reward"])
    assert episode["row"]["extra_info"]["env_id"] == env_id and 1 in episode["mask"]


# --------------------------------------------------------------------------- Search-R1's data, scripted policy
class SearchThenAnswer:
    """The policy the scripted LM plays: search the question, then answer the gold answer
    once documents came back (text after ``</search>`` checks the stop strings)."""

    def __init__(self, examples: list[QAExample]):
        self.answers = {e.question: e.answers[0] for e in examples}

    def __call__(self, context: str) -> str:
        question = next(q for q in self.answers if q in context)
        if context.rstrip().endswith("</information>"):
            return f"<think> the documents say it </think>\n<answer> {self.answers[question]} </answer>"
        return f"<think> I need facts </think>\n<search> {question} </search> text past the stop string"


def search_r1_rows(examples: list[QAExample], *, with_flashrag_columns: bool = True) -> list[dict]:
    """Rows laid out as Search-R1's scripts/data_process/nq_search.py writes them."""
    from searchgym.envs.protocols import make_protocol

    protocol = make_protocol("search_r1")
    rows = []
    for index, example in enumerate(examples):
        row = {
            "data_source": "nq",
            "prompt": [{"role": "user", "content": protocol.prompt(example)}],
            "ability": "fact-reasoning",
            "reward_model": {"style": "rule", "ground_truth": {"target": list(example.answers)}},
            "extra_info": {"split": "test", "index": index},
        }
        if with_flashrag_columns:
            row = {"id": example.id, "question": example.question, "golden_answers": list(example.answers), **row}
        rows.append(row)
    return rows


def run_worker(config, client, parquet: Path) -> DataProto:
    """verl's AgentLoopWorker in this process (its errors arrive unwrapped)."""
    worker = AgentLoopWorker(config, client)
    return asyncio.run(worker.generate_sequences(verl_batch(config, parquet)))


@pytest.fixture(scope="module")
def retrieval_url():
    """`searchgym serve` over the env's default corpus, as the Search-R1 recipe runs it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    searchgym_cli = str(Path(sys.executable).with_name("searchgym"))
    proc = subprocess.Popen([searchgym_cli, "serve", "--corpus", "synthwiki", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if not proc.stdout.readline():  # the start line, printed once the socket listens
            raise RuntimeError(f"searchgym serve did not start: {proc.stderr.read()[-2000:]}")
        yield f"http://127.0.0.1:{port}/retrieve"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_search_r1_parquet_trains_unchanged_with_the_scripted_policy(ray_session, model_path, tmp_path, retrieval_url):
    """Search-R1's rows, the env's retrieval through `searchgym serve` (HTTPRetriever)."""
    examples = load_dataset("synthwiki", split="dev")[:2]
    parquet = write_parquet(search_r1_rows(examples), tmp_path / "nq_test.parquet")
    # Search-R1's rows name no agent loop: make searchgym's verl's default one.
    # Three documents are long in the tiny tokenizer's few hundred tokens: a roomy budget.
    config = verl_config(
        model_path, loop_file(tmp_path, ENV_ID, env_kwargs={"retriever": retrieval_url}),
        **{"actor_rollout_ref.rollout.agent.default_agent_loop": "searchgym", "actor_rollout_ref.rollout.response_length": 2048},
    )
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(SearchThenAnswer(examples), tiny_tokenizer()))
    output = run_worker(config, server_client(config, server), parquet)

    assert type(gym.make(ENV_ID, retriever=retrieval_url).unwrapped.retriever).__name__ == "HTTPRetriever"
    tokenizer = tiny_tokenizer()
    for episode, example in zip(episodes(output), examples):
        assert replay(episode, tokenizer, budget=2048, retriever=retrieval_url) == episode["reward"] == 1.0  # Search-R1's EM
        turns = episode["turns"]
        assert [t["generated"] > 0 for t in turns] == [True, True] and turns[0]["observation"] > 0 and turns[1]["observation"] == 0
        first = episode["response"][: turns[0]["generated"]]
        # The sampled ids end at the stop string, exactly as generated (not re-tokenized text).
        assert tokenizer.decode(first) == f"<think> I need facts </think>\n<search> {example.question} </search>"
        observation = tokenizer.decode(episode["response"][turns[0]["generated"] : turns[0]["generated"] + turns[0]["observation"]])
        assert observation.strip().startswith("<information>") and observation.strip().endswith("</information>")
        second = episode["response"][turns[0]["generated"] + turns[0]["observation"] :]
        assert tokenizer.decode(second) == f"<think> the documents say it </think>\n<answer> {example.answers[0]} </answer>"
        assert episode["reward_at"] == len(episode["response"]) - 1  # verl puts the reward on the last token
        assert episode["mask"] == [1] * turns[0]["generated"] + [0] * turns[0]["observation"] + [1] * turns[1]["generated"]
    assert list(output.non_tensor_batch["num_searches"]) == [1.0, 1.0]
    assert list(output.non_tensor_batch["answered"]) == [1.0, 1.0]
    assert [c["em"] for c in output.non_tensor_batch["reward_components"]] == [1.0, 1.0]


def test_the_response_budget_cuts_an_episode(ray_session, model_path, tmp_path):
    """A response_length shorter than one search turn: the episode stops there, the
    response is cut to the budget and flagged; the reward is what the env gave so far.
    Without rollout.calculate_log_probs no logprobs go back to verl."""
    examples = load_dataset("synthwiki", split="dev")[:1]
    parquet = write_parquet(search_r1_rows(examples), tmp_path / "short.parquet")
    config = verl_config(
        model_path, loop_file(tmp_path, ENV_ID),
        **{
            "actor_rollout_ref.rollout.agent.default_agent_loop": "searchgym",
            "actor_rollout_ref.rollout.response_length": 24,
            "actor_rollout_ref.rollout.calculate_log_probs": False,
        },
    )
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(SearchThenAnswer(examples), tiny_tokenizer()))
    output = run_worker(config, server_client(config, server), parquet)
    (episode,) = episodes(output)
    assert len(episode["response"]) == 24 and set(episode["mask"]) == {1}
    assert output.non_tensor_batch["cut_by_length"][0] == 1.0 and output.non_tensor_batch["answered"][0] == 0.0
    assert episode["reward"] == 0.0
    assert "rollout_log_probs" not in output.batch.keys() and episode["logprobs"] is None


def test_action_text_is_what_searchgym_backends_give_the_env():
    """Decoded ids, trailing end-of-sequence dropped, cut after the first stop string."""
    tok = tiny_tokenizer()
    ids = list(encode_text(tok, "<search> Kelvaro </search> then more")) + [tok.eos_token_id]
    assert action_text(tok, ids, ["</search>", "</answer>"]) == "<search> Kelvaro </search>"
    assert action_text(tok, ids, ["</answer>"]) == "<search> Kelvaro </search> then more"
    assert action_text(tok, [tok.eos_token_id], ["</search>"]) == ""


# --------------------------------------------------------------------------- errors
def test_a_row_prepared_for_another_env_is_a_config_error(ray_session, model_path, tmp_path):
    parquet = write_parquet(verl_rows(ENV_ID, split="dev", limit=1), tmp_path / "dev.parquet")
    config = verl_config(model_path, loop_file(tmp_path, "searchgym/RSearch-v0"))
    message = (
        "SearchGymAgentLoop plays searchgym/RSearch-v0 (env_id of the agent-loop config), got a row prepared for "
        "searchgym/SearchR1-v0. Prepare the data for the same env, or drop env_id from the config to follow the rows."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        run_worker(config, server_client(config, model=model_path), parquet)


def test_rows_without_an_env_id_need_one_in_the_config(ray_session, model_path, tmp_path):
    parquet = write_parquet(search_r1_rows(load_dataset("synthwiki", split="dev")[:1]), tmp_path / "nq.parquet")
    config = verl_config(model_path, loop_file(tmp_path), **{"actor_rollout_ref.rollout.agent.default_agent_loop": "searchgym"})
    with pytest.raises(ConfigError, match=r"^SearchGymAgentLoop expects an env id: set env_id in the agent-loop config file"):
        run_worker(config, server_client(config, model=model_path), parquet)


def test_a_prompt_over_the_rollout_prompt_length_is_a_config_error(ray_session, model_path, tmp_path):
    parquet = write_parquet(verl_rows(ENV_ID, split="dev", limit=1), tmp_path / "dev.parquet")
    config = verl_config(model_path, loop_file(tmp_path), **{"actor_rollout_ref.rollout.prompt_length": 16})
    with pytest.raises(ConfigError, match=r"over rollout\.prompt_length=16\. Raise data\.max_prompt_length"):
        run_worker(config, server_client(config, model=model_path), parquet)


def test_the_server_refuses_sampling_it_cannot_do(model_path):
    server = LanguageModelServer(model_path, max_model_len=64)
    with pytest.raises(ConfigError, match=r"^LanguageModelServer samples without top-k; expects top_k -1 \(off\), got 5\. Set rollout\.top_k=-1\.$"):
        asyncio.run(server.generate([1, 2, 3], {"top_k": 5}, "r"))
    with pytest.raises(ConfigError, match=r"^LanguageModelServer expects sampling params among .*, got best_of\. "):
        asyncio.run(server.generate([1, 2, 3], {"best_of": 2}, "r"))
    with pytest.raises(ConfigError, match=r"leaves no room to generate within max_model_len=64\. Raise max_model_len"):
        asyncio.run(server.generate(list(range(64)), {}, "r"))
    out = asyncio.run(server.generate([1, 2, 3], {"max_tokens": 5, "logprobs": True, "temperature": 0}, "r"))
    assert len(out.token_ids) == len(out.log_probs) <= 5 and out.stop_reason == "completed"


# --------------------------------------------------------------------------- data
def test_prepared_rows_round_trip_through_parquet(tmp_path):
    env = gym.make(ENV_ID, split="train")
    examples = env.unwrapped.examples[:4]
    path = write_parquet(verl_rows(ENV_ID, split="train", limit=4), tmp_path / "train.parquet")
    rows = read_parquet(path)
    assert [r["agent_name"] for r in rows] == ["searchgym"] * 4
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2, 3]
    assert {r["extra_info"]["env_id"] for r in rows} == {ENV_ID} and {r["extra_info"]["split"] for r in rows} == {"train"}
    for row, example in zip(rows, examples):
        _, info = env.reset(options={"example": example})
        assert row["prompt"] == info["prompt_messages"]
        assert row["reward_model"] == {"style": "searchgym", "ground_truth": {"target": list(example.answers)}}
    back = read_examples(path)
    assert back == examples and [dict(b.metadata) for b in back] == [dict(e.metadata) for e in examples]


def test_search_r1_parquet_reads_into_qa_examples(tmp_path):
    examples = load_dataset("synthwiki", split="dev")[:3]
    full = write_parquet(search_r1_rows(examples), tmp_path / "full.parquet")
    bare = write_parquet(search_r1_rows(examples, with_flashrag_columns=False), tmp_path / "bare.parquet")
    assert [(e.id, e.question, e.answers) for e in read_examples(full)] == [(e.id, e.question, e.answers) for e in examples]
    # Without FlashRAG's columns: the question from the prompt, the id from data_source/split/index.
    read = read_examples(bare)
    assert [(e.question, e.answers) for e in read] == [(e.question, e.answers) for e in examples]
    assert [e.id for e in read] == ["nq-test-0", "nq-test-1", "nq-test-2"]
    assert dict(read[1].metadata) == {"data_source": "nq", "split": "test", "index": 1}


def test_bad_rows_raise_data_format_errors(tmp_path):
    row = search_r1_rows(load_dataset("synthwiki", split="dev")[:1], with_flashrag_columns=False)[0]
    with pytest.raises(DataFormatError, match=_exact(
        "rows.parquet, line 3: expected gold answers in reward_model.ground_truth.target (a list of strings) or "
        "golden_answers, got reward_model={'style': 'rule', 'ground_truth': {'target': []}}."
    )):
        example_from_row({**row, "reward_model": {"style": "rule", "ground_truth": {"target": []}}}, where="rows.parquet", line=3)
    with pytest.raises(DataFormatError, match=_exact(
        "verl row: expected the question in extra_info.question, a question column, or a user prompt ending in "
        "'Question: ...', got prompt=[{'role': 'user', 'content': 'no question here'}]."
    )):
        example_from_row({**row, "prompt": [{"role": "user", "content": "no question here"}]})
    with pytest.raises(DataFormatError, match=_exact("verl row: expected extra_info to be a mapping, got str 'x'.")):
        example_from_row({**row, "extra_info": "x"})
    missing = write_parquet([{"question": "q", "answer": "a"}], tmp_path / "other.parquet")
    with pytest.raises(DataFormatError, match=r"expected verl rows with the columns data_source, prompt, reward_model, got a file without"):
        read_parquet(missing)
    with pytest.raises(DataFileNotFoundError, match=r"No parquet file at .*nothing\.parquet; run `python -m searchgym\.integrations\.verl prepare`"):
        read_parquet(tmp_path / "nothing.parquet")


def test_prepare_command_writes_train_and_test_parquet(tmp_path):
    run = [sys.executable, "-m", "searchgym.integrations.verl"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    help_text = subprocess.run([*run, "prepare", "--help"], capture_output=True, text=True, check=True, env=env).stdout
    assert "--env ENV" in help_text and "--env-kwargs ENV_KWARGS" in help_text
    done = subprocess.run([*run, "prepare", "--out", str(tmp_path), "--limit", "2"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert len(read_examples(tmp_path / "train.parquet")) == 2 and len(read_examples(tmp_path / "test.parquet")) == 2
    bad = subprocess.run([*run, "prepare", "--out", str(tmp_path), "--test-split", "train"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: prepare expects different train and test splits, got 'train' for both."
    converted = subprocess.run([*run, "from-search-r1", str(tmp_path / "test.parquet"), "--out", str(tmp_path / "q.jsonl")],
                               capture_output=True, text=True, env=env)
    assert converted.returncode == 0, converted.stderr
    assert load_dataset(str(tmp_path / "q.jsonl")) == read_examples(tmp_path / "test.parquet")


@pytest.mark.parametrize("gpus, overrides", [(8, []), (1, ["data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=32"])])
def test_the_search_r1_recipe_composes_and_passes_verls_checks(gpus, overrides):
    """search_r1.yaml on top of verl's ppo_trainer.yaml, as `verl.trainer.main_ppo` composes
    it with the documented command lines, passes verl's own config validation."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    folder = subprocess.run([sys.executable, "-m", "searchgym.integrations.verl", "config-dir"], capture_output=True, text=True, check=True).stdout.strip()
    assert Path(folder) == ROOT / "searchgym" / "integrations" / "verl"
    with initialize_config_dir(config_dir=folder, version_base=None):
        config = compose(config_name="search_r1", overrides=[
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={folder}/agent_loop_search_r1.yaml",
            f"trainer.n_gpus_per_node={gpus}", *overrides,
        ])
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert config.algorithm.adv_estimator == "grpo" and config.actor_rollout_ref.rollout.n == 5
    assert config.actor_rollout_ref.actor.kl_loss_type == "low_var_kl" and np.isclose(config.actor_rollout_ref.actor.kl_loss_coef, 0.001)
    assert (config.actor_rollout_ref.rollout.prompt_length, config.actor_rollout_ref.rollout.response_length) == (2048, 4096)
    assert config.actor_rollout_ref.rollout.agent.default_agent_loop == "searchgym"
    (entry,) = OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert entry.name == "searchgym" and entry._target_ == "searchgym.integrations.verl.agent_loop.SearchGymAgentLoop"
    assert entry.env_id == "searchgym/SearchR1-v0" and entry.env_kwargs.retriever == "http://127.0.0.1:8000/retrieve"
    (generic,) = OmegaConf.load(Path(folder) / "agent_loop.yaml")
    assert generic._target_ == entry._target_ and generic.env_id is None


# --------------------------------------------------------------------------- the game as tools of verl's tool agent loop
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
TOOL_WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}, "max_turns": 3, "top_k": 1}


def tool_call(name: str, **arguments: object) -> str:
    import json

    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


class ToolPlay:
    """The policy the scripted LM plays through tool calls. Question 0: two parallel
    searches, then the gold answer as a plain reply. Question 1: a search, then the answer
    call, then a last reply after the episode ended. Question 2: a call of a tool the game
    does not have, then a search (whose result no turn reads: the loop's turn limit).
    Question 3: the gold answer at once, after a think block, without any call."""

    def __init__(self, examples: list[QAExample]):
        self.examples = examples

    def __call__(self, context: str) -> str:
        index = next(i for i, e in enumerate(self.examples) if e.question in context)
        example, results = self.examples[index], context.count("<tool_response>")
        if index == 0:
            if results == 0:
                return "Two searches at once.\n" + tool_call("search", query=example.question) + "\n" + tool_call("search", query="founded")
            return f"{example.answers[0]}"
        if index == 1:
            return [tool_call("search", query=example.question), tool_call("answer", answer="not it"), "Done."][min(results, 2)]
        if index == 2:
            return tool_call("lookup", query="x") if results == 0 else tool_call("search", query=example.question)
        return f"<think> I know this one. </think> {example.answers[0]}"


def tool_files(tmp_path: Path, **env_kwargs: object) -> tuple[Path, Path]:
    """A tool config with the game's two tools, and the packaged agent-loop file."""
    tools = tmp_path / "tools.yaml"
    entry = {"type": "native", "env_id": ENV_ID, "env_kwargs": {**TOOL_WORLD, **env_kwargs}}
    OmegaConf.save(OmegaConf.create({"tools": [
        {"class_name": "searchgym.integrations.verl.tools.SearchGymTool", "config": {**entry, "name": name}} for name in ("search", "answer")
    ]}), tools)
    return tools, ROOT / "searchgym" / "integrations" / "verl" / "agent_loop_tools.yaml"


def tool_config(model_path: str, tmp_path: Path, **overrides: object):
    tools, loops = tool_files(tmp_path)
    config = verl_config(model_path, loops, **{
        "actor_rollout_ref.rollout.multi_turn.enable": True,
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(tools),
        "actor_rollout_ref.rollout.multi_turn.format": "hermes",
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls": 4,
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length": 8192,
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 3,
        "actor_rollout_ref.rollout.prompt_length": 2048, "data.max_prompt_length": 2048,
        "actor_rollout_ref.rollout.response_length": 1536,
        **overrides,
    })
    config.actor_rollout_ref.model.custom_chat_template = HERMES_TEMPLATE
    return config


def tool_episodes(output: DataProto, tokenizer) -> list[dict]:
    """Each sample of verl's batch: its prompt text, its response split into the model's
    turns (mask 1) and the tool text (mask 0), its reward and what the loop recorded."""
    batch, extra = output.batch, output.non_tensor_batch
    width = batch["prompts"].shape[1]
    out = []
    for i in range(len(output)):
        attention = batch["attention_mask"][i]
        response_len = int(attention[width:].sum())
        response, mask = batch["responses"][i, :response_len].tolist(), batch["response_mask"][i, :response_len].tolist()
        spans, start = [], 0
        for pos in range(1, len(mask) + 1):
            if pos == len(mask) or mask[pos] != mask[start]:
                spans.append((mask[start], tokenizer.decode(response[start:pos])))
                start = pos
        out.append({
            "prompt": tokenizer.decode(batch["prompts"][i, width - int(attention[:width].sum()) :].tolist()),
            "spans": spans,
            "reward": float(batch["rm_scores"][i].sum()) if "rm_scores" in batch.keys() else None,
            "score": float(extra["score"][i]) if "score" in extra else None,
            "tool_rewards": list(extra["tool_rewards"][i]),
            "summary": extra["searchgym_episode"][i],
        })
    return out


def test_the_games_tools_play_through_verls_tool_agent_loop(ray_session, model_path, tmp_path):
    """verl's AgentLoopWorker runs SearchGymToolAgentLoop (verl's ToolAgentLoop, tools from
    the tool config, verl's hermes reader, its token building and masks) with the scripted
    policy: each episode's reward is what a fresh env gives for the same turns."""
    examples = gym.make(ENV_ID, split="dev", **TOOL_WORLD).unwrapped.examples[:4]
    parquet = write_parquet(verl_rows(ENV_ID, split="dev", limit=4, tools=True, **TOOL_WORLD), tmp_path / "tools.parquet")
    config = tool_config(model_path, tmp_path)
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(ToolPlay(examples), tiny_tokenizer()))
    output = run_worker(config, server_client(config, server), parquet)

    tokenizer = tiny_tokenizer()
    first, second, third, fourth = tool_episodes(output, tokenizer)
    env = gym.make(ENV_ID, split="dev", action_format="tools", **TOOL_WORLD)
    # The prompt verl rendered: the env's tools through the template, then the env's prompt.
    _, info = env.reset(options={"example": examples[0]})
    assert info["tools"][0]["function"]["description"] in first["prompt"] and info["messages"][0]["content"] in first["prompt"]
    # 0: the two searches are one turn (two tool messages), the plain reply is the answer: EM 1.
    env.reset(options={"example": examples[0]})
    calls = [{"type": "function", "function": {"name": "search", "arguments": {"query": q}}} for q in (examples[0].question, "founded")]
    _, r1, _, _, info = env.step({"role": "assistant", "content": "Two searches at once.", "tool_calls": calls})
    shown = [m["content"] for m in info["messages"][-2:]]
    _, r2, terminated, _, info = env.step(examples[0].answers[0])
    assert terminated and info["reward_components"]["em"] == 1.0
    assert first["reward"] == first["score"] == pytest.approx(r1 + r2) == 1.0
    assert first["summary"]["num_searches"] == 2 and first["summary"]["num_turns"] == 2 and first["summary"]["answered"]
    assert [m for m, _ in first["spans"]] == [1, 0, 1]
    tool_text = first["spans"][1][1]
    assert tool_text.count("<tool_response>") == 2 and all(s in tool_text for s in shown)
    assert first["tool_rewards"] == [r1, 0.0]  # the turn's reward on its first call
    # 1: ended by the answer call; the reply after it changes nothing.
    assert second["summary"]["answered"] and second["summary"]["prediction"] == "not it" and second["reward"] == 0.0
    assert "Answer received. The episode is over." in second["spans"][3][1] and second["spans"][-1] == (1, "Done.<|im_end|>")
    # 2: verl answers the unknown tool itself; the env plays that turn too (a bad call), then
    # the search; verl's turn limit (3) stops its loop before reading the third turn, and the
    # env reads it all the same (its text was generated and is trained on): its own budget of
    # 3 turns ends the episode there, unanswered, as a fresh env does.
    assert "Unknown function 'lookup'" in third["spans"][1][1]
    summary = third["summary"]
    assert summary["num_invalid"] == 1 and summary["num_searches"] == 1 and summary["num_turns"] == 3
    assert summary["ended"] and not summary["cut"] and not summary["answered"]
    assert third["reward"] == 0.0 and output.non_tensor_batch["answered"][2] == 0.0
    # 3: no tool was ever called; the reply is the final answer (its think block dropped).
    assert fourth["summary"]["prediction"] == examples[3].answers[0] and fourth["reward"] == 1.0 and fourth["tool_rewards"] == []
    assert set(output.meta_info["reward_extra_keys"]) == set(REWARD_INFO_KEYS)


class S3Play:
    """s3 through tools: a search of the question, a selection of its first document, then finish."""

    def __call__(self, context: str) -> str:
        question = context.split("Question: ", 1)[1].split("\n", 1)[0]
        results = context.count("<tool_response>")
        return [tool_call("search", query=question), tool_call("select", doc_ids=[1]), tool_call("finish")][min(results, 2)]


def test_s3_selects_and_finishes_through_verls_tool_agent_loop(ray_session, model_path, tmp_path):
    """s3's three tools (select's doc_ids keep their integer items in verl's schema); the
    reward is the env's Gain Beyond RAG for the same turns."""
    s3 = "searchgym/S3-v0"
    world = {"corpus_options": TOOL_WORLD["corpus_options"], "top_k": 2, "initial_top_k": 1}
    tools = tmp_path / "s3_tools.yaml"
    OmegaConf.save(OmegaConf.create({"tools": [
        {"class_name": "searchgym.integrations.verl.tools.SearchGymTool",
         "config": {"type": "native", "name": name, "env_id": s3, "env_kwargs": world}} for name in ("search", "select", "finish")
    ]}), tools)
    config = tool_config(model_path, tmp_path, **{
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(tools), "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 4,
    })
    parquet = write_parquet(verl_rows(s3, split="dev", limit=1, tools=True, **world), tmp_path / "s3.parquet")
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(S3Play(), tiny_tokenizer()))
    (episode,) = tool_episodes(run_worker(config, server_client(config, server), parquet), tiny_tokenizer())

    assert '"doc_ids": {' in episode["prompt"] and '"items": {"type": "integer"}' in episode["prompt"]
    env = gym.make(s3, split="dev", action_format="tools", **world)
    example = env.unwrapped.examples[0]
    env.reset(options={"example": example})
    total = 0.0
    for name, arguments in (("search", {"query": example.question}), ("select", {"doc_ids": [1]}), ("finish", {})):
        _, reward, terminated, _, info = env.step({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]})
        total += reward
    assert terminated and episode["reward"] == pytest.approx(total) and episode["summary"]["answered"]
    assert episode["summary"]["reward_components"] == info["reward_components"]
    assert "Kept document 1." in episode["spans"][3][1]


def test_the_tools_play_under_verls_plain_tool_agent_loop(ray_session, model_path, tmp_path):
    """Rows run by verl's own tool_agent loop: the tools find the question in
    tools_kwargs.<tool>.create_kwargs and play the turns; the step rewards are the tool
    rewards (no reward_score: verl's reward function scores the response)."""
    examples = gym.make(ENV_ID, split="dev", **TOOL_WORLD).unwrapped.examples[:2]
    rows = [{**row, "agent_name": "tool_agent"} for row in verl_rows(ENV_ID, split="dev", limit=2, tools=True, **TOOL_WORLD)]
    parquet = write_parquet(rows, tmp_path / "plain.parquet")
    config = tool_config(model_path, tmp_path)
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(ToolPlay(examples), tiny_tokenizer()))
    output = run_worker(config, server_client(config, server), parquet)
    first, second = tool_episodes(output, tiny_tokenizer())
    assert "rm_scores" not in output.batch.keys()
    # 0: one turn of two searches played (the plain answer after it is not: the loop ended).
    assert first["summary"]["num_searches"] == 2 and not first["summary"]["ended"] and first["tool_rewards"] == [0.0, 0.0]
    # 1: the answer call ends the episode inside the loop.
    assert second["summary"]["answered"] and second["summary"]["prediction"] == "not it"


def test_a_tool_config_that_cannot_play_is_a_config_error():
    from verl.tools.schemas import OpenAIFunctionToolSchema

    from searchgym.integrations.verl.tools import SearchGymTool, game_tools

    def tool(**config):
        return SearchGymTool({"type": "native", **config}, None)

    assert tool(name="search", env_id="SearchR1-v0").name == "search"
    assert [t["function"]["name"] for t in game_tools("S3-v0")] == ["search", "select", "finish"]
    with pytest.raises(ConfigError, match=r"^SearchGymTool expects config\.env_id, a registered env id such as searchgym/SearchR1-v0, got None\.$"):
        tool(name="search")
    with pytest.raises(ConfigError, match=r"expects config\.name to be a tool of searchgym/SearchR1-v0's game \(search, answer\), got 'select'\.$"):
        tool(name="select", env_id="SearchR1-v0")
    with pytest.raises(ConfigError, match=r"expects a single-agent env id .*got searchgym/MultiAgentSearcher-v0\.$"):
        tool(name="search", env_id="MultiAgentSearcher-v0")
    with pytest.raises(ConfigError, match=r"action_format='tools'\), got action_format='tags'\.$"):
        tool(name="search", env_id="SearchR1-v0", env_kwargs={"action_format": "tags"})
    other = OpenAIFunctionToolSchema.model_validate(
        {"type": "function", "function": {"name": "search", "description": "web search", "parameters": {"type": "object", "properties": {}}}}
    )
    with pytest.raises(ConfigError, match=r"plays searchgym/SearchR1-v0's own schema, and the tool_schema of its entry differs: .* Leave tool_schema out"):
        SearchGymTool({"type": "native", "env_id": "SearchR1-v0"}, other)
    # The name may come from the entry's schema; the env's own schema is accepted as is.
    own = OpenAIFunctionToolSchema.model_validate(game_tools("SearchR1-v0")[1])
    assert SearchGymTool({"type": "native", "env_id": "SearchR1-v0"}, own).name == "answer"


def test_the_packaged_tool_files_load_in_verl():
    from hydra.utils import get_class
    from verl.tools.tool_registry import initialize_tools_from_config

    folder = ROOT / "searchgym" / "integrations" / "verl"
    tools = initialize_tools_from_config(str(folder / "tools_search_r1.yaml"))
    assert [t.name for t in tools] == ["search", "answer"]
    assert {t.env_id for t in tools} == {ENV_ID} and {t.env_kwargs["retriever"] for t in tools} == {"http://127.0.0.1:8000/retrieve"}
    (entry,) = OmegaConf.load(folder / "agent_loop_tools.yaml")
    assert entry.name == "searchgym_tool_agent" and get_class(entry._target_).__name__ == "SearchGymToolAgentLoop"


def test_tool_rows_carry_the_tool_prompt_and_each_tools_question(tmp_path):
    path = write_parquet(verl_rows("searchgym/RSearch-v0", split="dev", limit=2, tools=True, **TOOL_WORLD), tmp_path / "r.parquet")
    rows = read_parquet(path)
    env = gym.make("searchgym/RSearch-v0", split="dev", action_format="tools", **TOOL_WORLD)
    for row, example in zip(rows, env.unwrapped.examples):
        _, info = env.reset(options={"example": example})
        assert row["agent_name"] == "searchgym_tool_agent" and row["prompt"] == info["messages"]
        kwargs = row["extra_info"]["tools_kwargs"]
        assert sorted(kwargs) == ["answer", "search"]
        assert kwargs["search"]["create_kwargs"] == {
            "example_id": example.id, "question": example.question, "answers": list(example.answers),
            "metadata_json": row["extra_info"]["metadata_json"],
        }
    assert read_examples(path) == env.unwrapped.examples[:2]
    done = subprocess.run([sys.executable, "-m", "searchgym.integrations.verl", "prepare", "--tools", "--limit", "1", "--out", str(tmp_path / "cli"),
                           "--env-kwargs", '{"corpus_options": {"seed": 7, "num_passages": 400}}'],
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert read_parquet(tmp_path / "cli" / "train.parquet")[0]["agent_name"] == "searchgym_tool_agent"


def test_the_documented_tool_command_composes_and_passes_verls_checks():
    """docs/verl.md's one-GPU tool command line, composed as main_ppo composes it."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    folder = ROOT / "searchgym" / "integrations" / "verl"
    page = (ROOT / "docs" / "verl.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```bash\n(.*?)```", page, flags=re.S) if "agent_loop_tools.yaml" in b)
    command = block.replace("\\\n", " ").split("--config-name search_r1", 1)[1].splitlines()[0]
    overrides = [word.replace('"$CONF', str(folder)).replace('"', "") for word in command.split()]
    with initialize_config_dir(config_dir=str(folder), version_base=None):
        config = compose(config_name="search_r1", overrides=overrides)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    multi_turn = config.actor_rollout_ref.rollout.multi_turn
    assert multi_turn.enable and multi_turn.format == "hermes" and multi_turn.max_tool_response_length == 4096
    assert Path(multi_turn.tool_config_path) == folder / "tools_search_r1.yaml"
    (entry,) = OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert entry.name == "searchgym_tool_agent" and "tools_search_r1.yaml" in multi_turn.tool_config_path


def test_pooled_envs_coalesce_the_searches_of_episodes_stepping_in_threads():
    """verl's loops step each episode's env in a worker thread: the pool's envs share one
    coalescing retriever, so searches made at once go out as one call, each with its own hits."""
    import threading

    from searchgym.corpora.coalesce import CoalescingRetriever
    from searchgym.envs import search_env
    from searchgym.integrations.verl.agent_loop import EnvPool

    pool = EnvPool()
    kwargs = {"corpus_options": {"seed": 7, "num_passages": 400}}
    envs = [pool.acquire("searchgym/SearchR1-v0", kwargs) for _ in range(8)]
    coalescing = search_env(envs[0]).retriever
    assert isinstance(coalescing, CoalescingRetriever) and all(search_env(e).retriever is coalescing for e in envs)
    inner, calls, gate = coalescing.retriever, [], threading.Event()
    real = inner.search

    def slow(queries, k):
        calls.append(tuple(queries))
        gate.wait(5)
        return real(queries, k)

    inner.search = slow
    try:
        examples = search_env(envs[0]).examples[:8]
        for env, ex in zip(envs, examples):
            env.reset(options={"example_id": ex.id})
        out = [None] * 8
        threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, envs[i].step(f"<search> {examples[i].question} </search>")))
                   for i in range(8)]
        threads[0].start()
        while not calls:
            threading.Event().wait(0.001)
        for t in threads[1:]:
            t.start()
        while len(coalescing._pending) < 7:
            threading.Event().wait(0.001)
        gate.set()
        for t in threads:
            t.join(30)
    finally:
        del inner.search
    assert len(calls) == 2 and len(calls[1]) == 7
    for env, ex, (obs, *_) in zip(envs, examples, out):
        env.reset(options={"example_id": ex.id})
        assert env.step(f"<search> {ex.question} </search>")[0] == obs


# --------------------------------------------------------------------------- parity (tests/tool_parity.py)
class ParityPlay:
    """Each row's scenario texts, turn by turn (the turn is how many assistant turns the
    context holds); an empty reply once they run out (every scenario has ended by then)."""

    def __init__(self, texts: dict[str, tuple[str, ...]]):
        self.texts = texts

    def __call__(self, context: str) -> str:
        texts = next(t for question, t in self.texts.items() if question in context)
        turn = context.count("<|im_start|>assistant") - 1
        return texts[turn] if turn < len(texts) else ""


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/RECON-v0", "searchgym/RSearch-v0"])
def test_verls_tool_loop_scores_the_parity_texts_as_the_tag_game_scores_the_decisions(env_id, ray_session, model_path, tmp_path):
    """The verl leg of tests/integrations/test_tool_parity.py: well-formed, malformed, prose,
    parallel, cut and mixed turns through SearchGymToolAgentLoop (verl's ToolAgentLoop, its
    hermes reader, which drops an unreadable <tool_call> block) score what the tag game
    scores for the same decisions: the env reads each turn's text, so a malformed or cut
    call is its bad call, never a final answer made of the leftover text."""
    from tool_parity import SPLIT, WORLD, example, scenarios, tags_reward

    cases = scenarios(env_id)
    tools = tmp_path / "parity_tools.yaml"  # not tools.yaml, which tool_config writes
    names = [t["function"]["name"] for t in gym.make(env_id, action_format="tools", **WORLD).unwrapped.game.tools.tools]
    OmegaConf.save(OmegaConf.create({"tools": [
        {"class_name": "searchgym.integrations.verl.tools.SearchGymTool", "config": {"type": "native", "name": n, "env_id": env_id, "env_kwargs": WORLD}}
        for n in names
    ]}), tools)
    config = tool_config(model_path, tmp_path, **{
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(tools), "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 4,
    })
    parquet = write_parquet(verl_rows(env_id, split=SPLIT, limit=len(cases), tools=True, **WORLD), tmp_path / "parity.parquet")
    policy = ParityPlay({example(env_id, s.index).question: s.tools for s in cases})
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(policy, tiny_tokenizer()))
    played = tool_episodes(run_worker(config, server_client(config, server), parquet), tiny_tokenizer())
    for scenario, episode in zip(cases, played):
        where = f"{env_id} {scenario.name}: {episode['summary']} {episode['spans']}"
        assert episode["reward"] == pytest.approx(tags_reward(env_id, scenario.tags, scenario.index)), where
        if scenario.name in ("malformed", "cut", "mixed"):
            assert episode["summary"]["num_invalid"] == 1, where


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/RECON-v0", "searchgym/RSearch-v0"])
def test_verls_tool_loop_scores_the_ecosystem_table_as_the_tag_game(env_id, ray_session, model_path, tmp_path):
    """verl's leg of tests/integrations/test_parity_ecosystems.py: the right, wrong, malformed
    and over-budget decisions (tool_parity.ecosystem_scenarios) through
    SearchGymToolAgentLoop score what the tag game scores for them. verl's loop ends on a
    reply without a call it can read (the malformed turn: the env reads it as its bad call,
    and the episode left open is scored at its turn budget, as TRL's is: ``trl_turns``); the
    over-budget searches end the episode at the env's turn budget, inside verl's."""
    from tool_parity import SPLIT, WORLD, ecosystem_scenarios, example, tags_reward

    cases = ecosystem_scenarios(env_id)
    tools = tmp_path / "ecosystem_tools.yaml"
    names = [t["function"]["name"] for t in gym.make(env_id, action_format="tools", **WORLD).unwrapped.game.tools.tools]
    OmegaConf.save(OmegaConf.create({"tools": [
        {"class_name": "searchgym.integrations.verl.tools.SearchGymTool", "config": {"type": "native", "name": n, "env_id": env_id, "env_kwargs": WORLD}}
        for n in names
    ]}), tools)
    config = tool_config(model_path, tmp_path, **{
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(tools),
        # More turns than the env's budget (WORLD's max_turns), so that the env's ends the over-budget episode.
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": int(WORLD["max_turns"]) + 2,
        "actor_rollout_ref.rollout.response_length": 6144,
    })
    rows = list(verl_rows(env_id, split=SPLIT, limit=cases[-1].index + 1, tools=True, **WORLD))
    parquet = write_parquet([rows[s.index] for s in cases], tmp_path / "ecosystem.parquet")
    policy = ParityPlay({example(env_id, s.index).question: s.tools for s in cases})
    server = ray.remote(LanguageModelServer).remote(ScriptedLM(policy, tiny_tokenizer()))
    played = tool_episodes(run_worker(config, server_client(config, server), parquet), tiny_tokenizer())
    assert [e["summary"]["example_id"] for e in played] == [example(env_id, s.index).id for s in cases]
    for scenario, episode in zip(cases, played):
        where = f"{env_id} {scenario.name}: {episode['summary']} {episode['spans']}"
        assert episode["reward"] == pytest.approx(tags_reward(env_id, scenario.tags[: scenario.trl_turns], scenario.index)), where
        # Every episode ends; the malformed one is left open by verl's loop and scored as cut.
        assert episode["summary"]["ended"] and episode["summary"]["cut"] == (scenario.name == "malformed"), where
    right, wrong, malformed, over = played
    assert right["summary"]["answered"] and right["reward"] > wrong["reward"], env_id
    assert malformed["summary"]["num_invalid"] == 1 and not malformed["summary"]["answered"]
    assert over["summary"]["num_turns"] == int(WORLD["max_turns"]) and not over["summary"]["answered"] and not over["summary"]["cut"]
