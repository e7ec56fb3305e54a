"""Progress that moves before the work ends: plain lines when stderr is a file, tokens
while LM turns run, the trainer's phases and micro-batches, SB3's timesteps and updates."""

import io
import re

import pytest

from env_helpers import SMALL_WORLD
from searchgym.error import ConfigError
from searchgym.progress import Progress, generated_tokens


def counts(text: str, desc: str) -> list[tuple[int, str]]:
    """(units done, the rest of the line) of each plain progress line labelled ``desc``."""
    return [(int(m.group(1)), m.group(2)) for m in re.finditer(rf"^{re.escape(desc)}: (\d+)/\d+ (.*)$", text, flags=re.M)]


def test_a_file_gets_plain_lines_at_open_at_most_every_interval_and_at_close(monkeypatch):
    monkeypatch.setenv("SEARCHGYM_PROGRESS_SECONDS", "3600")
    stream = io.StringIO()
    with Progress(10, "work", "ep", stream=stream) as progress:
        for _ in range(10):
            progress.update(1)
            generated_tokens(7)
    assert stream.getvalue().splitlines()[0] == "work: 0/10 ep (0%) 0 s"
    assert re.fullmatch(r"work: 10/10 ep \(100%\) \d+ s \[tokens=70\]", stream.getvalue().splitlines()[-1])
    assert len(stream.getvalue().splitlines()) == 2 and "\r" not in stream.getvalue()
    generated_tokens(5)  # a closed display no longer listens
    assert progress.tokens == 70

    monkeypatch.setenv("SEARCHGYM_PROGRESS_SECONDS", "0")
    stream = io.StringIO()
    with Progress(None, "open-ended", "step", initial=3, stream=stream) as progress:
        progress.note(phase="update 1/2")
        progress.update(2)
        progress.note(phase=None, loss="0.5")
    assert stream.getvalue().splitlines()[1:3] == ["open-ended: 3 step 0 s [phase=update 1/2]", "open-ended: 5 step 0 s [phase=update 1/2]"]
    assert stream.getvalue().splitlines()[-1] == "open-ended: 5 step 0 s [loss=0.5]"


def test_a_bad_interval_is_a_config_error(monkeypatch):
    monkeypatch.setenv("SEARCHGYM_PROGRESS_SECONDS", "soon")
    with pytest.raises(ConfigError, match=r"^SEARCHGYM_PROGRESS_SECONDS expects a number of seconds >= 0, got 'soon'\.$"):
        Progress(1, "x", "ep", stream=io.StringIO())


def test_the_lm_bench_counts_tokens_before_its_first_episode_ends(monkeypatch, capsys):
    """All episodes of an LM bench end together after minutes of turns: the line moves with
    the tokens and the driver's rounds while 0 episodes are done."""
    pytest.importorskip("torch")
    from searchgym.bench import BenchConfig, run_bench
    from searchgym.lm.testing import tiny_model_folder

    monkeypatch.setenv("SEARCHGYM_PROGRESS_SECONDS", "0")
    config = BenchConfig(
        runs=[("SearchR1-v0", "lm")], model=str(tiny_model_folder()), limit=2, num_envs=2, max_new_tokens=8,
        env_options={"*": {"corpus_options": SMALL_WORLD, "max_turns": 2}},
    )
    run_bench(config, None, progress=True)
    lines = counts(capsys.readouterr().err, "lm @ SearchR1-v0")
    before_any_end = [rest for done, rest in lines if done == 0]
    tokens = [int(m.group(1)) for rest in before_any_end for m in [re.search(r"tokens=(\d+)", rest)] if m]
    assert tokens and tokens[-1] >= 8 and tokens == sorted(tokens), lines
    assert any("round=2" in rest for rest in before_any_end), lines
    assert lines[-1][0] == 2


def test_a_training_step_shows_its_rollout_tokens_and_update_micro_batches(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from searchgym.lm.testing import tiny_model_folder
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    monkeypatch.setenv("SEARCHGYM_PROGRESS_SECONDS", "0")
    Trainer(Args(
        model=str(tiny_model_folder()), env_options={"corpus_options": SMALL_WORLD, "max_turns": 2}, out=str(tmp_path / "run"),
        total_steps=1, questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=1, progress=True,
        tensorboard=False, threads=1,
    )).train()
    lines = counts(capsys.readouterr().err, "train")
    during = [rest for done, rest in lines if done == 0]
    assert any("phase=rollout" in rest and "tokens=" in rest for rest in during), lines
    assert [re.search(r"update (\d+)/4 micro-batches", rest).group(1) for rest in during if "update" in rest] == ["0", "1", "2", "3"]
    assert lines[-1][0] == 1 and "reward=" in lines[-1][1]


def test_sb3_training_writes_timesteps_and_updates_to_a_file_while_it_learns(tmp_path, monkeypatch, capsys):
    pytest.importorskip("stable_baselines3")
    from searchgym.sb3.train import SB3Args, train_sb3

    monkeypatch.setenv("SEARCHGYM_PROGRESS_SECONDS", "0")
    train_sb3(SB3Args(
        algorithm="sb3-ppo", total_timesteps=128, sb3_options={"n_steps": 32, "batch_size": 32}, out=str(tmp_path / "ppo"),
        env_options={"corpus_options": SMALL_WORLD}, num_envs=2, eval_limit=2, eval_every=128, progress=True,
    ))
    lines = counts(capsys.readouterr().err, "sb3-ppo train")
    assert any(0 < done < 128 for done, _ in lines), lines
    assert any("phase=update" in rest and "updates=1" in rest for _, rest in lines), lines
    assert lines[-1][0] == 128


def test_a_wait_is_said_after_its_seconds_and_only_while_it_lasts(monkeypatch, capsys):
    import time

    from searchgym.progress import wait_seconds, waiting

    with waiting("a quick thing", after=5.0):
        pass
    with waiting("the slow thing", after=0.1):
        time.sleep(0.45)  # said at 0.1 s, then every 0.3 s: at 0.4 s
    time.sleep(0.4)  # nothing is said once the block ended
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[0] for line in lines] == ["waiting for the slow thing"] * 2
    assert re.fullmatch(r"waiting for the slow thing: 0\.[1-3] s without an answer", lines[0])
    monkeypatch.setenv("SEARCHGYM_WAIT_SECONDS", "later")
    with pytest.raises(ConfigError, match=r"^SEARCHGYM_WAIT_SECONDS expects a number of seconds >= 0 \(0: never say\), got 'later'\.$"):
        wait_seconds()
    monkeypatch.delenv("SEARCHGYM_WAIT_SECONDS")
    assert wait_seconds() == 10.0
