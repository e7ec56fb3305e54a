"""What a new user meets first (issue 63, items 15-16): argparse's words for a bad value, a
mistyped flag answered with its command's usage, ``gym.make`` without the namespace, a
missing corpus file named once, Ctrl-C ending ``view --serve`` and ``serve`` alike (exit
130), and docs commands that do not write each other's folders."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.cli import main
from searchgym.corpora.registry import load_corpus
from searchgym.error import DataFileNotFoundError, SearchGymError

ROOT = Path(__file__).resolve().parents[1]


def test_a_value_that_is_not_a_number_is_named_in_words(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "--run", "SearchR1-v0:oracle", "--limit", "three"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "searchgym bench: error: argument --limit: invalid positive integer value: 'three'"
    with pytest.raises(SystemExit):
        main(["bench", "--run", "SearchR1-v0:oracle", "--limit", "0"])
    assert capsys.readouterr().err.splitlines()[-1] == "searchgym bench: error: argument --limit: expected a positive integer, got 0"


def test_a_mistyped_flag_gets_its_commands_usage_not_the_top_levels(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "--run", "SearchR1-v0:oracle", "--limt", "3"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: searchgym bench ") and "--limit LIMIT" in err
    assert err.splitlines()[-1] == "searchgym bench: error: unrecognized arguments: --limt (did you mean --limit?) 3"
    assert "{demo," not in err  # the top level's list of commands is not the answer


def test_gym_make_without_the_namespace_says_to_add_it():
    with pytest.raises(gym.error.NameNotFound) as e:  # still Gymnasium's error, for code that catches it
        gym.make("SearchR1-v0")
    assert isinstance(e.value, SearchGymError)
    assert str(e.value) == ("'SearchR1-v0' is not an env id: searchgym's ids carry the namespace searchgym/; "
                            "use gym.make('searchgym/SearchR1-v0') (the CLI's --env and --run take 'SearchR1-v0' as it is).")
    with pytest.raises(gym.error.NameNotFound, match=r"use gym.make\('searchgym/RSearch-v0'\)"):
        gym.make("RSearch-v0", max_turns=2)
    assert gym.make("searchgym/SearchR1-v0").spec.id == "searchgym/SearchR1-v0"
    from searchgym.envs.registration import full_env_id, user_env_ids

    assert full_env_id("SearchR1-v0") == "searchgym/SearchR1-v0" and "SearchR1-v0" not in user_env_ids()


def test_a_missing_corpus_file_is_named_once(tmp_path):
    missing = tmp_path / "wiki-18.jsonl"
    with pytest.raises(DataFileNotFoundError) as e:
        load_corpus(missing)
    assert str(e.value).count(str(missing)) == 1 and e.value.filename == str(missing)
    assert str(e.value).endswith("pass a built-in corpus name instead (wiki-vital, synthwiki, deepwiki).")


def _ctrl_c(args: list[str], ready: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``searchgym ARGS`` until it prints ``ready``, then send SIGINT; its exit and output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    # SIGINT as a terminal leaves it, even where the test runner was started with it ignored (a background job of a
    # shell): Python would never turn it into KeyboardInterrupt, and uvicorn would re-raise it into nothing.
    process = subprocess.Popen([sys.executable, "-m", "searchgym.cli", *args], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if ready in line:
                break
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return subprocess.CompletedProcess(args, process.returncode, "".join(lines) + out, err)


def test_ctrl_c_ends_view_serve_and_serve_with_130(tmp_path):
    from searchgym.bench import BenchConfig, run_bench

    run_bench(BenchConfig(runs=[("SearchR1-v0", "oracle")], limit=1, env_options={"*": {"corpus_options": {"num_passages": 400}}}),
              tmp_path / "bench", progress=False)
    view = _ctrl_c(["view", str(tmp_path / "bench"), "--serve", "--port", "0"], "searchgym view: serving http://127.0.0.1:", tmp_path)
    assert view.returncode == 130, view.stderr
    assert view.stdout.splitlines()[-1] == "searchgym view: stopped" and view.stderr == ""  # one line, as serve's
    assert (tmp_path / "bench" / "view.html").is_file()
    serve = _ctrl_c(["serve", "--corpus", "synthwiki", "--retriever", "bm25", "--port", "0"], "searchgym serve:", tmp_path)
    assert serve.returncode == 130 and serve.stdout.splitlines()[-1] == "searchgym serve: stopped" and serve.stderr == "", serve.stderr


def _commands(text: str) -> list[str]:
    """The commands of ``text``'s shell blocks, continuations joined, comments dropped."""
    commands = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(" ".join(line.split()))
    return commands


def test_no_two_sft_commands_of_the_docs_write_one_folder():
    """docs/trl.md's quick warm start and docs/training.md's SFT once both wrote runs/sft: the
    second run then resumed, or was refused, in the first one's folder."""
    writers: dict[str, set[str]] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for command in _commands(page.read_text(encoding="utf-8")):
            out = re.search(r"^searchgym sft .*--out[= ](\S+)", command)
            if out:
                writers.setdefault(out.group(1), set()).add(command)
    assert writers, "no page runs searchgym sft"
    assert {out: sorted(cmds) for out, cmds in writers.items() if len(cmds) > 1} == {}
    assert "runs/sft" in writers and "runs/sft-trl-quick" in writers  # training.md's and trl.md's


def test_the_readmes_quick_commands_run_as_written(tmp_path):
    """The README's quick forms are commands, not make errors (``make bench --quick`` is
    none); its synthwiki index builds and serves as written, into a git-ignored folder."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = _commands(text)
    assert ".venv/bin/python benchmarks/retrieval.py --quick" in commands
    assert "--quick form" not in text and not any(c.startswith("make") and "--" in c for c in commands)
    index = next(c for c in commands if c.startswith("searchgym index --corpus synthwiki"))
    serve = next(c for c in commands if c.startswith("searchgym serve --index") and "synth" in c)
    folder = index.split("--out ")[1].split()[0]
    assert serve == f"searchgym serve --index {folder} --corpus synthwiki"  # a synthwiki index names its corpus
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert f"/{folder.split('/')[0]}/" in ignored  # what the README writes stays out of the checkout's changes
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    built = subprocess.run([sys.executable, "-m", "searchgym.cli", *index.split()[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0 and f"Serve it: searchgym serve --index {folder} --corpus synthwiki" in built.stdout, built.stderr
    served = _ctrl_c([*serve.split()[1:], "--port", "0"], "searchgym serve:", tmp_path)
    assert served.returncode == 130 and "/retrieve" in served.stdout, served.stderr
