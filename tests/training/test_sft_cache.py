"""SFT checkpoints in the cache folder: the key, the skip on a second call, the atomic write."""

import csv
import dataclasses
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.training import sft_cache  # noqa: E402
from searchgym.training.sft import SFTArgs  # noqa: E402
from searchgym.training.sft_cache import KEY_FILE, cached_sft, is_complete, sft_key  # noqa: E402


@pytest.fixture(scope="module")
def args():
    return SFTArgs(
        model=str(tiny_model_folder()), env_options={"corpus_options": SMALL_WORLD}, limit=4, epochs=1, batch_size=4,
        micro_batch_size=4, lr=1e-3, warmup_steps=1, eval_limit=0, num_envs=2, progress=False, threads=1,
    )


def test_the_key_changes_with_the_settings_the_model_and_the_data_only(args, tmp_path):
    key = sft_key(args)
    assert len(key) == 16 and key == sft_key(dataclasses.replace(args))
    # Where the run is written and how it is shown do not change the weights.
    assert sft_key(dataclasses.replace(args, out=str(tmp_path), progress=True, threads=2)) == key
    changed = [
        dataclasses.replace(args, lr=2e-3),
        dataclasses.replace(args, limit=3),  # other questions
        dataclasses.replace(args, env_options={"corpus_options": {**SMALL_WORLD, "seed": 8}}),  # another world
        dataclasses.replace(args, env_options={**args.env_options, "top_k": 1}),
        dataclasses.replace(args, model=str(tiny_model_folder(seed=1))),
    ]
    keys = [sft_key(a) for a in changed]
    assert key not in keys and len(set(keys)) == len(keys)


def test_the_same_questions_in_another_file_have_the_same_key_and_other_questions_another(args, tmp_path):
    import gymnasium as gym

    from searchgym.corpora.datasets import write_qa

    examples = gym.make("searchgym/SearchR1-v0", split="train", **args.env_options).unwrapped.examples[:4]
    a, b, c = (write_qa(qs, tmp_path / name) for qs, name in ((examples, "a.jsonl"), (examples, "b.jsonl"), (examples[:3], "c.jsonl")))
    keys = [sft_key(dataclasses.replace(args, env_options={**args.env_options, "dataset": str(f)})) for f in (a, b, c)]
    assert keys[0] == keys[1] and keys[2] != keys[0], keys


def test_a_second_call_returns_the_cached_run_without_training(args, tmp_path, monkeypatch):
    run = cached_sft(args, root=tmp_path)
    assert run == tmp_path / sft_key(args) and is_complete(run)
    recorded = json.loads((run / KEY_FILE).read_text())
    assert recorded["key"] == run.name and recorded["sft"]["lr"] == args.lr and "out" not in recorded["sft"]
    assert (run / "final" / "model.safetensors").is_file() and (run / "curves.png").is_file()
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["eval_reward"] == ""  # eval_limit=0: no evaluation
    assert [p.name for p in tmp_path.iterdir()] == [run.name]  # no temporary folder left

    def no_training(_args):
        raise AssertionError("trained again")

    monkeypatch.setattr(sft_cache, "sft", no_training)
    mtime = (run / "final" / "model.safetensors").stat().st_mtime_ns
    assert cached_sft(dataclasses.replace(args, progress=True), root=tmp_path, key=run.name) == run
    assert (run / "final" / "model.safetensors").stat().st_mtime_ns == mtime
    with pytest.raises(ConfigError, match=r"^cached_sft expects the key of its settings, got '0000000000000000' for settings whose key is"):
        cached_sft(args, root=tmp_path, key="0" * 16)


def test_an_interrupted_run_leaves_no_checkpoint_and_its_leftovers_are_removed(args, tmp_path, monkeypatch):
    from pathlib import Path

    def interrupted(a):
        final = Path(a.out) / "final"
        final.mkdir()
        (final / "config.json").write_text("{}")  # half a checkpoint
        raise KeyboardInterrupt

    monkeypatch.setattr(sft_cache, "sft", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cached_sft(args, root=tmp_path)
    assert list(tmp_path.iterdir()) == []

    # A run killed outright leaves its temporary folder; the next call removes it (its process is gone).
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    key = sft_key(args)
    leftover = tmp_path / f".{key}-{int(dead.stdout)}-abc"
    (leftover / "final").mkdir(parents=True)
    alive = tmp_path / f".{key}-{os.getppid()}-abc"  # a run in progress in another process is left alone
    alive.mkdir()
    monkeypatch.undo()
    run = cached_sft(args, root=tmp_path)
    assert is_complete(run) and not leftover.exists() and alive.exists()


def test_settings_that_cannot_be_described_are_refused(args, tmp_path):
    with pytest.raises(ConfigError, match=r"^An SFT setting expects JSON-like values .* got object"):
        sft_key(dataclasses.replace(args, env_options={**args.env_options, "token_counter": object()}))


def test_a_stopped_cached_run_says_nothing_is_kept_and_the_next_call_starts_over(args, tmp_path):
    """SIGTERM during a real cached SFT: sft saves final/ in the temporary folder, which
    cached_sft then removes, so its message must not point there (the demo's trained row
    printed sft's "wrote .../final ... continue from step N" about a deleted folder)."""
    import signal
    import threading
    import time

    from searchgym.error import TrainingStopped

    long = dataclasses.replace(args, epochs=400, batch_size=1, micro_batch_size=1)  # far more steps than the test waits for
    key = sft_key(long)

    def terminate_after_two_steps():
        while not any(len(m.read_text().splitlines()) >= 3 for m in tmp_path.glob(f".{key}-*/metrics.csv")):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_after_two_steps, daemon=True).start()
    with pytest.raises(TrainingStopped) as stopped:
        cached_sft(long, root=tmp_path)
    message = str(stopped.value)
    assert message == (
        f"stopped by SIGTERM while training the cached SFT checkpoint {key}: nothing of it is kept (the cache holds "
        "complete runs only, and the partial run's temporary folder is removed). The same call trains it again from "
        f"the start and caches it in {tmp_path / key}."
    )
    assert stopped.value.by == "SIGTERM" and "wrote" not in message and "continue from step" not in message
    assert list(tmp_path.iterdir()) == []  # what the message says: nothing kept
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
