"""Explicit model calls: components answer from a play's replies, play_all batches the
calls of many plays, step_all steps many envs with their components' calls batched."""

import pytest
from env_helpers import make_small, search_turn
from lm_helpers import recording_lm

from searchgym.envs import BatchCounts, ModelCall, ModelUser, StrictActions, env_play, play_all, step_all
from searchgym.envs.components.lm_summarizer import LLMSummarizer
from searchgym.envs.components.model_calls import CallNeeded, model_users, replay, run_play
from searchgym.error import BackendError, ConfigError, InvalidActionError
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_tokenizer


class FailingLM(ScriptedLM):
    def _generate(self, prompt_ids, params):
        raise BackendError("server timed out")


class Echo(ModelUser):
    """Two model calls in a row, the second after the first has answered."""

    def __init__(self, lm):
        self.lm = lm

    def __call__(self, i):
        return self.generate([f"p{i}"], max_new_tokens=2)[0].text + self.generate([f"q{i}"], max_new_tokens=2)[0].text


def test_a_component_outside_a_play_calls_its_model_and_inside_answers_from_replies():
    lm = recording_lm(lambda prompt: "ok")
    echo = Echo(lm)
    assert echo(1) == "okok" and lm.batches == [1, 1]
    play = replay(lambda: echo(2), [echo])
    first = next(play)
    assert first == ModelCall.of(lm, ["p2"], max_new_tokens=2) and echo.replies is None  # lent only while it runs
    second = play.send(first.run())
    assert second.prompts == ("q2",)
    with pytest.raises(StopIteration) as stop:
        play.send(second.run())
    assert stop.value.value == "okok"
    echo.replies = {}
    with pytest.raises(CallNeeded):
        echo(3)
    assert model_users(echo, object()) == [echo]


def test_code_that_catches_exceptions_around_a_model_call_is_still_batched():
    lm = recording_lm(lambda prompt: "ok")
    echo = Echo(lm)

    def careful(i):
        try:
            return echo(i)
        except Exception:  # a waiting call is not an Exception: it passes through
            return "swallowed"

    assert play_all([replay(lambda: careful(0), [echo]), replay(lambda: careful(1), [echo])]) == ["okok", "okok"]
    assert lm.batches == [2, 2]


def test_play_all_joins_the_pending_calls_of_each_round_and_keeps_failures_apart():
    lm = recording_lm(lambda prompt: "ok")
    echo, broken = Echo(lm), Echo(FailingLM(["unused"], tiny_tokenizer()))
    plays = [
        replay(lambda: echo(0), [echo]),
        replay(lambda: broken(1), [broken]),
        replay(lambda: "no call", [echo]),  # a step that calls no model
        replay(lambda: echo(3), [echo]),
        replay(lambda: broken(4), [broken]),
    ]
    counts = BatchCounts()
    outputs = play_all(plays, counts)
    assert [o if isinstance(o, str) else type(o) for o in outputs] == ["okok", BackendError, "no call", "okok", BackendError]
    assert str(outputs[1]) == "server timed out"
    assert lm.batches == [2, 2] and (counts.calls, counts.requests, counts.rounds) == (3, 6, 2)
    # Alone, each call runs as it comes.
    assert run_play(replay(lambda: echo(7), [echo])) == "okok"


def test_play_all_joins_seeded_calls_keeping_each_prompts_seed():
    calls = []

    class SeedRecordingLM(ScriptedLM):
        def _generate(self, prompt_ids, params):
            calls.append((len(prompt_ids), params.seed))
            return super()._generate(prompt_ids, params)

    lm = SeedRecordingLM(lambda prompt: "ok", tiny_tokenizer())
    requests = [(["a"], [3]), (["b", "c"], [4, 5]), (["d"], None), (["e"], 9)]

    def play(call):
        generations = yield call
        return [g.text for g in generations]

    counts = BatchCounts()
    outputs = play_all([play(ModelCall.of(lm, p, max_new_tokens=2, temperature=1.0, seed=s)) for p, s in requests], counts)
    assert outputs == [["ok"], ["ok", "ok"], ["ok"], ["ok"]]
    # The seeded requests share one call with their seeds in order; the unseeded one goes apart.
    assert sorted(calls, key=lambda c: c[1] is None) == [(4, (3, 4, 5, 9)), (1, None)]
    assert counts.calls == 2 and counts.requests == 4
    with pytest.raises(ConfigError, match=r"^ModelCall.of expects the keyword arguments of LanguageModel.generate \(max_new_tokens, temperature, top_p, stop, seed, top_k\), got \['seeds'\]\.$"):
        ModelCall.of(lm, ["a"], seeds=[1])


def test_sixteen_recon_envs_stepping_at_once_make_one_summarizer_call():
    lm = recording_lm(lambda prompt: "Summary: " + prompt.split("Search Query (used by the retriever): ")[1].split("\n")[0])
    envs = [make_small("searchgym/RECON-v0", summarizer=LLMSummarizer(lm)) for _ in range(16)]
    questions = envs[0].unwrapped.examples[:16]
    actions = [search_turn(envs[0], ex.question) for ex in questions]

    def reset():
        for env, ex in zip(envs, questions):
            env.reset(seed=0, options={"example_id": ex.id})

    reset()
    counts = BatchCounts()
    together = step_all(envs, actions, counts)
    # one round for the 16 searches (one retriever call), one for the 16 summaries (one generate)
    assert lm.batches == [16] and (counts.calls, counts.requests, counts.rounds) == (1, 16, 2)
    assert (counts.searches, counts.search_requests) == (1, 16)
    reset()
    alone = [env.step(action) for env, action in zip(envs, actions)]
    assert lm.batches == [16] + [1] * 16
    assert together == alone and all(f"Summary: {ex.question}" in obs for (obs, *_), ex in zip(together, questions))
    with pytest.raises(Exception, match="one action per env, got 1 actions for 16 envs"):
        step_all(envs, actions[:1])


def test_a_wrapper_that_changes_step_runs_whole_and_a_failing_step_fails_alone():
    lm = recording_lm(lambda prompt: "a summary")
    strict, plain, other = (make_small("searchgym/RECON-v0", summarizer=LLMSummarizer(lm)) for _ in range(3))
    strict = StrictActions(strict)
    for env in (strict, plain, other):
        env.reset(seed=0)
    # StrictActions changes step: its env steps whole (its summarizer call alone), the others batch.
    counts = BatchCounts()
    query = plain.unwrapped.example.question
    out = step_all([strict, plain, other], [search_turn(plain, query), search_turn(plain, query), "no tags at all"], counts)
    assert lm.batches == [1, 1] and (counts.calls, counts.requests) == (1, 1)
    assert [o[4]["query"] for o in out] == [query, query, None] and out[2][4]["invalid_reason"]
    # A step that raises is that env's result; the others are stepped all the same.
    out = step_all([strict, plain], ["no tags at all", search_turn(plain, query)])
    assert isinstance(out[0], InvalidActionError) and out[1][4]["query"] == query and lm.batches == [1, 1, 1]
    with pytest.raises(InvalidActionError):
        run_play(env_play(strict, "still no tags"))


class FirstLineGenerator(ModelUser):
    """A frozen generator whose model calls go through ModelUser.generate."""

    def __init__(self, lm):
        self.lm = lm

    def __call__(self, question, docs):
        return self.generate([question + "\n" + "\n".join(docs)], max_new_tokens=8)[0].text


def test_role_envs_batch_the_frozen_generator_of_their_games():
    pytest.importorskip("pettingzoo")
    import gymnasium as gym

    from searchgym.envs.protocols import Complete
    from searchgym.envs.protocols.s3 import S3Protocol

    lm = recording_lm(lambda prompt: prompt.split("\n")[0])
    envs = [gym.make("searchgym/MultiAgentSearcher-v0", corpus_options={"seed": 7, "num_passages": 400}, generator=FirstLineGenerator(lm)) for _ in range(4)]
    questions = envs[0].unwrapped.examples[:4]
    for env, ex in zip(envs, questions):
        env.reset(seed=0, options={"example_id": ex.id})
    counts = BatchCounts()
    out = step_all(envs, [S3Protocol().write([Complete()])] * 4, counts)
    assert all(terminated for _, _, terminated, _, _ in out)
    # Nothing selected: the generator's documents are the naive top-k, so the searcher's
    # answer and the naive-RAG baseline are one identical call, made once, for the 4 envs at once.
    assert lm.batches == [4] and (counts.calls, counts.requests, counts.rounds) == (1, 4, 1)
    assert all(info["prediction"] and ex.question.startswith(info["prediction"]) for (*_, info), ex in zip(out, questions))
