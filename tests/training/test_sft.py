"""SFT warm start: oracle trajectories with the student's tokens and masks, and a short run."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD, make_small  # noqa: E402
from lm_helpers import one_core_clock  # noqa: E402
from searchgym.error import ConfigError, SearchGymError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder, tiny_tokenizer  # noqa: E402
from searchgym.training.sft import SFTArgs, oracle_trajectories, pretrain_on_corpus, scratch_model, sft  # noqa: E402


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/S3-v0", "searchgym/RSearch-v0"])
def test_oracle_trajectories_hold_the_oracles_turns_as_generated_tokens(env_id):
    from searchgym.envs.registration import ENV_SPECS
    from searchgym.envs.protocols import make_protocol

    stops = make_protocol(ENV_SPECS[env_id]["protocol"]).stop_strings
    tok = tiny_tokenizer()
    trajectories = oracle_trajectories(env_id, tok, env_options={"corpus_options": SMALL_WORLD}, limit=4, num_envs=2)
    assert len(trajectories) == 4
    for t in trajectories:
        generated = [s for s in t.segments if s.generated]
        observed = [s for s in t.segments if not s.generated]
        assert generated and observed
        assert sum(t.loss_mask) == sum(len(s) for s in generated)
        for s in generated:
            text = tok.decode(s.token_ids)
            # Each turn is a complete action: it ends at a stop string or with end-of-sequence.
            assert s.token_ids[-1] == tok.eos_token_id or any(text.endswith(stop) for stop in stops)


class HalfThinkingOracle:
    """A user's teacher (module:factory or a registered name): the oracle, whose odd-seeded
    episodes think out loud differently."""

    @staticmethod
    def for_env(env):
        from searchgym.agents import SynthWikiOracle

        class Teacher(SynthWikiOracle):
            def act(self, observations, infos):
                actions = super().act(observations, infos)
                return [a.replace("I need to find", "Odd seed, I look up") if i.get("episode_seed", 0) % 2 else a
                        for a, i in zip(actions, infos)]

        return Teacher.for_env(env)


def test_a_users_teacher_plays_each_question_as_many_times_as_asked():
    from searchgym.agents import register_agent, unregister_agent

    tok = tiny_tokenizer()
    register_agent("half-thinking-teacher", HalfThinkingOracle.for_env, needs_lm=False)
    try:
        trajectories = oracle_trajectories(
            "searchgym/SearchR1-v0", tok, env_options={"corpus_options": SMALL_WORLD}, limit=3, num_envs=2,
            teacher="half-thinking-teacher", episodes_per_question=2,
        )
    finally:
        unregister_agent("half-thinking-teacher")
    turns = [tok.decode([t for s in tr.segments if s.generated for t in s.token_ids]) for tr in trajectories]
    assert len(trajectories) == 6
    assert sum("Odd seed, I look up" in t for t in turns) == 3 and sum("I need to find" in t for t in turns) == 3


def test_a_teacher_that_needs_a_language_model_or_does_not_exist_is_refused():
    tok = tiny_tokenizer()
    with pytest.raises(ConfigError, match=r"^The SFT teacher 'naive-rag' needs a language model; a teacher plays without one"):
        oracle_trajectories("searchgym/SearchR1-v0", tok, env_options={"corpus_options": SMALL_WORLD}, limit=1, num_envs=1, teacher="naive-rag")
    # sft refuses it before any model loads or pretrains (the pretraining would be raised here if it ran).
    with pytest.raises(ConfigError, match=r"^The SFT teacher 'naive-rag' needs a language model"):
        sft(SFTArgs(teacher="naive-rag", pretrain_epochs=1000))
    with pytest.raises(SearchGymError, match="Unknown agent 'no-such-teacher'"):
        sft(SFTArgs(teacher="no-such-teacher"))
    with pytest.raises(ConfigError, match=r"^SFTArgs.episodes_per_question expects a positive integer, got 0\.$"):
        sft(SFTArgs(episodes_per_question=0))
    with pytest.raises(ConfigError, match=r"^SFTArgs.teacher_options expects a dict of the teacher's options, got list\.$"):
        sft(SFTArgs(teacher_options=[]))
    # A teacher that solves nothing leaves SFT nothing to learn from: said, not an empty run.
    with pytest.raises(ConfigError, match=r"^The teacher 'random' solved none of 2 episodes"):
        oracle_trajectories("searchgym/SearchR1-v0", tok, env_options={"corpus_options": SMALL_WORLD}, limit=2, num_envs=1, teacher="random")


def test_scratch_model_tokenizes_the_corpus_compactly_and_fits_the_protocol():
    env = make_small("searchgym/SearchR1-v0")
    model, tok = scratch_model(env, size="tiny", vocab_size=1024)
    passage = env.unwrapped.corpus[0].contents
    assert len(tok.encode(passage)) < len(tiny_tokenizer().encode(passage)) / 1.5
    assert tok.decode(tok.encode(passage)) == passage
    for tag in ("<search>", "</search>", "<answer>", "</answer>"):
        assert len(tok.encode(tag, add_special_tokens=False)) == 1
    assert model.config.hidden_size // model.config.num_attention_heads == 64


def test_a_larger_scratch_vocabulary_gives_names_fewer_tokens():
    """SFTArgs.scratch_vocab: the world's names (passage titles) in fewer pieces, each a word or so."""
    env = make_small("searchgym/SearchR1-v0")
    titles = sorted({p.title for p in env.unwrapped.corpus})
    pieces = {}
    for vocab in (1024, 8192):
        _, tok = scratch_model(env, size="tiny", vocab_size=vocab)
        pieces[vocab] = sum(len(tok.encode(t, add_special_tokens=False)) for t in titles) / len(titles)
    words = sum(len(t.split()) for t in titles) / len(titles)
    assert pieces[8192] < pieces[1024] and pieces[8192] <= 1.5 * words, (pieces, words)


def test_a_short_sft_run_lowers_the_loss_and_saves_a_trainable_model(tmp_path):
    args = SFTArgs(
        env_options={"corpus_options": SMALL_WORLD}, limit=16, epochs=6, batch_size=4, micro_batch_size=2,
        lr=3e-3, warmup_steps=2, scratch_size="tiny", eval_limit=2, max_new_tokens=8, num_envs=2,
        out=str(tmp_path / "sft"), progress=False, threads=1,
    )
    rows = sft(args)
    assert len(rows) == 24
    first, last = rows[0]["loss"], rows[-1]["loss"]
    assert last < first * 0.7, (first, last)
    assert "eval_reward" in rows[-1]
    assert (tmp_path / "sft" / "curves.png").is_file()
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    trainer = Trainer(Args(
        model=str(tmp_path / "sft" / "final"), env_options={"corpus_options": SMALL_WORLD, "max_turns": 3}, out=str(tmp_path / "rl"),
        total_steps=1, questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, progress=False, tensorboard=False,
    ))
    assert trainer.train()[0]["step"] == 1
    with pytest.raises(ConfigError, match="holds a finished SFT run .*; pick another --out to train again"):
        sft(args)
    with pytest.raises(ConfigError, match=r"holds an SFT run with other settings \(epochs: 6 there, 7 now\); rerun it"):
        sft(dataclasses.replace(args, epochs=7))


def test_without_a_fixed_count_each_micro_batch_runs_under_the_thread_tuner(tmp_path, monkeypatch):
    import searchgym.lm.threads as threads_module

    tuners = []

    class RecordingTuner(threads_module.ThreadTuner):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.counts = []
            tuners.append(self)

        def start_pass(self):
            super().start_pass()
            self.counts.append(torch.get_num_threads())

    monkeypatch.setattr(threads_module, "ThreadTuner", RecordingTuner)
    one_core_clock(monkeypatch)  # every pass measures a CPU share of 0.5 for 2 threads
    caller = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rows = sft(SFTArgs(
            env_options={"corpus_options": SMALL_WORLD}, limit=4, epochs=1, batch_size=4, micro_batch_size=2,
            scratch_size="tiny", eval_limit=0, out=str(tmp_path / "sft"), progress=False,
        ))
        assert torch.get_num_threads() == 2  # the caller's count, restored after each micro-batch
    finally:
        torch.set_num_threads(caller)
    assert len(rows) == 1 and len(tuners) == 1
    (tuner,) = tuners
    # A window of one micro-batch: the second already runs at the one core received.
    assert tuner.passes == 2 and tuner.counts == [2, 1] and (tuner.choice, tuner.changes) == (1, 1)


def test_pretraining_on_the_corpus_lowers_its_loss_and_feeds_sft(tmp_path):
    import csv

    env = make_small("searchgym/SearchR1-v0")
    torch.manual_seed(0)
    model, tok = scratch_model(env, size="tiny", vocab_size=1024)
    corpus = env.unwrapped.corpus
    text = f"{corpus[3].title}\n{corpus[3].text}"
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])

    def held_loss():
        with torch.no_grad():
            return float(model(input_ids=ids, labels=ids).loss)

    before = held_loss()
    rows = pretrain_on_corpus(
        model, tok, corpus, epochs=2, block=64, batch_size=16, lr=3e-3, warmup_steps=2, max_grad_norm=1.0,
        weight_decay=0.0, seed=0, log_path=tmp_path / "pretrain.csv", progress=False,
    )
    blocks = sum(len(tok(f"{p.title}\n{p.text}", add_special_tokens=False)["input_ids"]) + 1 for p in corpus) // 64
    assert len(rows) == 2 * -(-blocks // 16)
    assert rows[-1]["loss"] < rows[0]["loss"] * 0.6
    assert held_loss() < before * 0.6
    with open(tmp_path / "pretrain.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    with pytest.raises(ConfigError, match="fewer than one pretraining block"):
        pretrain_on_corpus(model, tok, corpus[:1], epochs=1, block=100_000, batch_size=1, lr=1e-3, warmup_steps=0,
                           max_grad_norm=1.0, weight_decay=0.0, seed=0, log_path=tmp_path / "p2.csv", progress=False)

    sft(SFTArgs(
        env_options={"corpus_options": SMALL_WORLD}, limit=4, epochs=1, batch_size=4, micro_batch_size=4, pretrain_epochs=1,
        pretrain_block=128, scratch_size="tiny", eval_limit=1, max_new_tokens=4, num_envs=2, out=str(tmp_path / "sft"),
        progress=False, threads=1,
    ))
    assert (tmp_path / "sft" / "pretrain.csv").is_file() and (tmp_path / "sft" / "final").is_dir()


def test_sft_config_errors():
    with pytest.raises(ConfigError, match="SFTArgs.pretrain_block expects an integer >= 8, got 4."):
        sft(SFTArgs(pretrain_block=4))
    with pytest.raises(ConfigError, match="SFTArgs.pretrain_epochs expects a non-negative integer, got -1."):
        sft(SFTArgs(pretrain_epochs=-1))
    with pytest.raises(SearchGymError, match="Unknown scratch model size 'huge'"):
        sft(SFTArgs(scratch_size="huge"))
    for bad in (100, 4096.0, True):
        with pytest.raises(ConfigError, match=rf"^SFTArgs.scratch_vocab expects an integer >= 512 .*, got {bad!r}\.$"):
            sft(SFTArgs(scratch_vocab=bad))
    with pytest.raises(ConfigError, match="SFTArgs.epochs expects a positive integer, got 0."):
        sft(SFTArgs(epochs=0))


def test_turn_logprobs_are_the_full_forward_passs_on_the_turn_tokens():
    from searchgym.lm.testing import tiny_causal_lm
    from searchgym.training.batch import collate, forward_logprobs
    from searchgym.training.sft import turn_logprobs

    tok = tiny_tokenizer()
    trajectories = oracle_trajectories("searchgym/SearchR1-v0", tok, env_options={"corpus_options": SMALL_WORLD}, limit=3, num_envs=3)
    batch = collate(trajectories, pad_id=tok.pad_token_id)
    model = tiny_causal_lm(context=max(len(t.context_ids()) for t in trajectories))
    full = forward_logprobs(model, batch)["logprobs"][batch.loss_mask.bool()]
    fast = turn_logprobs(model, batch)
    assert fast.shape == (int(batch.loss_mask.sum()),)
    torch.testing.assert_close(fast, full, atol=1e-5, rtol=1e-5)
    model.config.logit_scale = 0.5  # logits that are not the head's output alone: the full pass
    assert turn_logprobs(model, batch).shape == fast.shape


STOPPABLE = dict(limit=8, epochs=400, batch_size=1, micro_batch_size=1, eval_limit=0, num_envs=2)


def sft_process(out, signal_at_step, sig):
    """``searchgym sft`` on a tiny model in a subprocess, sent ``sig`` once its progress
    line shows ``signal_at_step`` steps done; its exit code, stderr and stdout."""
    command = [sys.executable, "-m", "searchgym.cli", "sft", "--model", str(tiny_model_folder()), "--threads", "1"]
    for name, value in STOPPABLE.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    command += ["--env-options", json.dumps({"corpus_options": SMALL_WORLD}), "--out", str(out)]
    env = {**os.environ, "SEARCHGYM_PROGRESS_SECONDS": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("sft: ") and int(line.split()[1].split("/")[0]) >= signal_at_step:
            process.send_signal(sig)
            break
    stdout, rest = process.communicate(timeout=120)
    return process.returncode, "".join(lines) + rest, stdout


def test_a_stopped_sft_run_saves_a_usable_final_and_the_same_command_continues(tmp_path, capsys):
    """Ctrl-C in a real process: final/ and a checkpoint, exit 130 and how to go on; then the
    same settings in this process continue from that step and stop again on SIGTERM."""
    import threading
    import time

    from transformers import AutoModelForCausalLM

    from searchgym.error import TrainingStopped

    out = tmp_path / "sft"
    code, stderr, stdout = sft_process(out, 1, signal.SIGINT)
    assert code == 130, stderr
    assert "SIGINT: stopping after this step and saving final/" in stdout
    step = torch.load(out / "checkpoint" / "state.pt", weights_only=False)["step"]
    assert step >= 1
    assert f"searchgym sft: stopped: stopped by SIGINT at step {step} of 3200: wrote {out / 'final'}" in stderr
    assert f"Run the same command (same --out and settings) to continue from step {step}." in stderr
    assert AutoModelForCausalLM.from_pretrained(out / "final").config.num_hidden_layers >= 1

    args = SFTArgs(model=str(tiny_model_folder()), env_options={"corpus_options": SMALL_WORLD}, out=str(out), threads=1, progress=False, **STOPPABLE)
    metrics = out / "metrics.csv"

    def terminate_two_steps_later():
        while len(metrics.read_text().splitlines()) < step + 3:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_two_steps_later, daemon=True).start()
    with pytest.raises(TrainingStopped, match="stopped by SIGTERM at step"):
        sft(args)
    assert f"continuing the SFT run in {out} from step {step}" in capsys.readouterr().out
    later = torch.load(out / "checkpoint" / "state.pt", weights_only=False)["step"]
    assert later >= step + 2
    logged = [int(line.split(",")[0]) for line in metrics.read_text().splitlines()[1:]]
    assert logged == list(range(1, later + 1))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are given back
