"""A model server that accepts the connection and never answers: the wait is said on
stderr while it lasts (attempt, timeout, URL), not 60 s x 4 attempts of silence."""

import re
import socket

import pytest

from searchgym.error import BackendError
from searchgym.lm.http import OpenAILM
from searchgym.lm.testing import tiny_tokenizer


@pytest.fixture
def silent_url():
    """An OpenAI-style base URL on 127.0.0.1 whose socket listens (the kernel accepts the
    connection) and never reads or answers a byte."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_a_server_that_never_answers_is_said_to_be_waited_on(silent_url, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHGYM_WAIT_SECONDS", "0.2")
    lm = OpenAILM("m", base_url=silent_url, timeout=0.8, max_retries=1, backoff=0.01, tokenizer=tiny_tokenizer())
    with pytest.raises(BackendError, match=r"timed out after 0.8 s \(2 attempts\)"):
        lm.generate(["Q"])
    err = capsys.readouterr().err
    url = re.escape(f"{silent_url}/completions")
    # After 0.2 s of each attempt (then every 0.6 s): what is waited on, which attempt of how many, and its timeout.
    said = re.findall(rf"^waiting for the model server at {url} \(attempt (\d) of 2, 0.8 s timeout\): (\d\.\d) s without an answer$", err, flags=re.M)
    attempts = [a for a, _ in said]
    assert attempts == sorted(attempts) and set(attempts) == {"1", "2"}, err  # each attempt said, in order
    assert all(0.2 <= float(s) <= 1.0 for _, s in said) and float(said[0][1]) < 0.6, err


def test_an_answer_in_time_says_nothing_and_zero_turns_it_off(silent_url, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHGYM_WAIT_SECONDS", "0")
    lm = OpenAILM("m", base_url=silent_url, timeout=0.3, max_retries=0, tokenizer=tiny_tokenizer())
    with pytest.raises(BackendError, match="timed out"):
        lm.generate(["Q"])
    assert "waiting for" not in capsys.readouterr().err


def test_the_bench_says_what_it_waits_on_while_no_episode_ends(silent_url, monkeypatch, capsys, tmp_path):
    """docs/bench.md's bench against a server that hangs: the wait is said, under --quiet too."""
    from searchgym.cli import main
    from searchgym.lm.testing import tiny_model_folder

    monkeypatch.setenv("SEARCHGYM_WAIT_SECONDS", "0.3")
    code = main(["bench", "--run", "SearchR1-v0:lm", "--limit", "1", "--backend", "openai", "--model", str(tiny_model_folder()),
                 "--backend-option", f"base_url={silent_url}", "--backend-option", "timeout=1", "--backend-option", "max_retries=0",
                 "--corpus-option", "seed=7", "--corpus-option", "num_passages=400", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"waiting for the model server at {silent_url}/completions (attempt 1 of 1, 1 s timeout): 0.3 s without an answer" in err
    assert "timed out after 1 s (1 attempts)" in err
