"""A newcomer's mistakes get a suggestion: misspelled gym.make keywords (and the names Search-R1
users bring, such as topk), preset options, model names, corpus names before a benchmark's resume
check, Search-R1's parquet given as a dataset; a missing optional dependency names the install
command that works where searchgym was installed from; .gitignore covers what the docs write."""

import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
import searchgym.error as error
from searchgym.bench import BenchConfig, run_bench
from searchgym.corpora.registry import check_data_name, load_dataset
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError, UnknownArgumentError, UnknownNameError
from searchgym.training.args import preset

SMALL = {"seed": 7, "num_passages": 400}
ROOT = Path(__file__).resolve().parent.parent
ENV_ARGUMENTS = (
    "action_format, context, context_options, corpus, corpus_options, dataset, dataset_options, generator, initial_top_k, judge, limit, max_action_chars, "
    "max_calls, max_context_tokens, max_observation_chars, max_query_chars, max_searches, max_turns, protocol, protocol_options, question_filter, reader, "
    "record, render_mode, replay, replay_misses, retriever, retriever_options, reward, reward_options, split, summarizer, summarizer_options, "
    "token_counter, tool_parser, top_k"
)


@pytest.mark.parametrize(
    "keyword, hint",
    [
        ("topk", " Did you mean 'top_k'?"),  # Search-R1's retriever.topk
        ("search_url", " Did you mean 'retriever'?"),  # Search-R1's search_url: the URL goes in retriever=
        ("max_turn", " Did you mean 'max_turns'?"),  # a typo
        ("corpus_option", " Did you mean 'corpus_options'?"),
        ("zzz", ""),  # nothing close: no guess
    ],
)
def test_gym_make_suggests_the_keyword(keyword, hint):
    with pytest.raises(TypeError) as e:  # still a TypeError, as Python's own, for code that catches it
        gym.make("searchgym/SearchR1-v0", corpus_options=SMALL, **{keyword: 5})
    assert isinstance(e.value, UnknownArgumentError)
    assert str(e.value).startswith(f"SearchEnv got an unexpected keyword argument {keyword!r}.{hint} It takes: {ENV_ARGUMENTS}.")


def test_role_envs_and_presets_suggest_too():
    with pytest.raises(ConfigError, match=r"^RoleEnv does not take 'topk'; expected options among: .*\. Did you mean 'top_k'\?$"):
        gym.make("searchgym/MultiAgentSearcher-v0", topk=3)
    with pytest.raises(UnknownArgumentError, match=r"^preset\('search-r1-grpo'\) got an unexpected keyword argument 'kl_coeff'\. "
                       r"Did you mean 'kl_coef'\? It takes: .*"):
        preset("search-r1-grpo", kl_coeff=0.01)
    with pytest.raises(UnknownNameError, match=r"^Unknown training preset 'search-r1'\. Did you mean 'search-r1-ppo'\?"):
        preset("search-r1")
    assert preset("search-r1-grpo", kl_coef=0.01).kl_coef == 0.01


def test_a_misspelled_model_name_is_suggested_not_blamed_on_the_network():
    from searchgym.lm.registry import load_lm
    from searchgym.lm.vllm import model_folder

    with pytest.raises(ConfigError) as e:
        load_lm("smolm2", cache=False)
    assert str(e.value).startswith("TransformersLM got 'smolm2', which is no built-in model name, local folder or cached model id. "
                                   "Did you mean 'smollm2'? It expects a local model folder")
    assert "internet" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^VLLMLM got 'smolm2', which is no built-in model name, .*\. Did you mean 'smollm2'\? It expects"):
        model_folder("smolm2")
    with pytest.raises(ConfigError, match=r"got 'tiny-randm', .*Did you mean 'tiny-random'\?"):
        load_lm("tiny-randm", cache=False)
    # A hub id (owner/name) is looked up, never guessed at (tests/lm/test_hf_backend.py covers its error).
    from searchgym.lm.models import check_model_name

    check_model_name("someone/smolm2", "TransformersLM")


def test_the_bench_checks_names_before_its_resume_check(tmp_path):
    config = dict(runs=[("SearchR1-v0", "random")], limit=2, num_envs=1)
    run_bench(BenchConfig(**config, env_options={"*": {"corpus_options": SMALL}}), tmp_path, progress=False)
    typo = BenchConfig(**config, env_options={"*": {"corpus": "synthwik", "corpus_options": SMALL}})
    with pytest.raises(UnknownNameError, match=r"^Unknown corpus 'synthwik'\. Did you mean 'synthwiki'\?"):
        run_bench(typo, tmp_path, progress=False)
    for options, expected, message in [
        ({"dataset": "wiki-vital-answerabel"}, UnknownNameError, r"^Unknown dataset 'wiki-vital-answerabel'\. Did you mean 'wiki-vital-answerable'\?"),
        ({"dataset": "no/such/qa.jsonl"}, DataFileNotFoundError, r"No such QA dataset file: 'no/such/qa.jsonl'"),
        ({"topk": 5}, UnknownArgumentError, r"^SearchR1-v0's env options got an unexpected keyword argument 'topk'\. Did you mean 'top_k'\?"),
    ]:
        with pytest.raises(expected, match=message):
            run_bench(BenchConfig(**config, env_options={"*": {"corpus_options": SMALL, **options}}), tmp_path, progress=False)
    # A changed but valid configuration is still reported as one.
    with pytest.raises(ConfigError, match=r"different configuration \(changed: limit\)"):
        run_bench(BenchConfig(**{**config, "limit": 3}, env_options={"*": {"corpus_options": SMALL}}), tmp_path, progress=False)


def test_check_data_name_opens_nothing(tmp_path):
    check_data_name("corpus", "synthwiki")
    check_data_name("dataset", None)
    (tmp_path / "qa.jsonl").write_text("not even json\n")
    check_data_name("dataset", str(tmp_path / "qa.jsonl"))  # a file is read when loaded, not here
    with pytest.raises(UnknownNameError, match=r"^Unknown corpus 'wiki-vitl'\. Did you mean 'wiki-vital'\?"):
        check_data_name("corpus", "wiki-vitl")


def test_search_r1_parquet_as_a_dataset_points_to_the_converter(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "test.parquet"
    # The columns Search-R1's scripts/data_process/nq_search.py writes.
    pq.write_table(pa.table({
        "data_source": ["nq"], "prompt": [[{"role": "user", "content": "Question: who?"}]], "ability": ["fact-reasoning"],
        "reward_model": [{"style": "rule", "ground_truth": {"target": ["Ann"]}}], "extra_info": [{"split": "test", "index": 0}],
    }), path)
    with pytest.raises(DataFormatError) as e:
        load_dataset(str(path))
    assert str(e.value) == (
        f"{path}: expected a JSON-lines QA dataset file (one JSON object per line, plain or gzip-compressed), got a Parquet "
        "file; Search-R1's processed "
        "parquet (nq_search.py and its siblings) converts to QA jsonl with "
        f"`python -m searchgym.integrations.verl from-search-r1 {path} --out {tmp_path / 'test.jsonl'}`."
    )
    with pytest.raises(DataFormatError, match=r"got a Parquet file; export it as JSON lines"):
        gym.make("searchgym/SearchR1-v0", corpus=str(path), dataset=str(path))


def test_install_hints_from_a_checkout_and_from_the_index(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert error.checkout_root() == ROOT
    assert error.install_command("lm") == "pip install -e '.[lm]'"
    assert str(error.MissingDependencyError("torch", "lm", "searchgym sft")) == (
        "searchgym sft requires the package 'torch', which is not installed. Install it with: pip install -e '.[lm]' (or run `make install`)"
    )
    monkeypatch.chdir(tmp_path)
    assert error.install_command("serve") == f"pip install -e '{ROOT}[serve]'"
    monkeypatch.setattr(error, "checkout_root", lambda: None)  # as an installed wheel sees itself
    assert str(error.MissingDependencyError("torch", "lm", "searchgym sft")) == (
        "searchgym sft requires the package 'torch', which is not installed. Install it with: pip install 'searchgym[lm]'"
    )


@pytest.mark.parametrize("command, module, extra", [(["sft", "--out", "{tmp}/sft"], "torch", "lm"),
                                                    (["bench", "--run", "SearchR1-v0:random", "--limit", "1", "--out", "{tmp}/b"], "matplotlib", None)])
def test_a_command_without_an_extra_says_what_to_install(tmp_path, command, module, extra):
    script = (f"import sys; sys.modules[{module!r}] = None\n"
              "from searchgym.cli import main\nsys.exit(main(sys.argv[1:]))")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in command]
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if extra is None:  # the bench runs on and writes no chart, saying how to get one
        assert done.returncode == 0, done.stderr[-2000:]
        assert "matplotlib is not installed (pip install -e '.[plot]'): no chart written." in done.stderr
        return
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (f"searchgym {command[0]}: error: searchgym {command[0]} requires the package {module!r}, which is not "
                           f"installed. Install it with: pip install -e '.[{extra}]' (or run `make install`)\n")


def test_gitignore_covers_what_documented_commands_write():
    paths = ["runs/sft/final/model.safetensors", "runs/trl/x", "data/searchgym_search_r1/train.parquet", "indexes/wiki18-bm25/meta.json",
             "results/bench/summary.json", "corpus.jsonl.searchgym/meta.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.split() == paths
    kept = subprocess.run(["git", "check-ignore", "--no-index", "searchgym/corpora/registry.py", "docs/data.md"], capture_output=True, text=True, cwd=ROOT)
    assert kept.stdout == ""
    assert re.search(r"^/runs/$", (ROOT / ".gitignore").read_text(), re.M)


def test_a_misspelled_flag_of_a_command_is_suggested(capsys):
    from searchgym.cli import main

    with pytest.raises(SystemExit) as e:
        main(["train", "--preset", "search-r1-grpo", "--kl-coeff", "0.1", "--totl-steps=3"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "searchgym train: error: unrecognized arguments: --kl-coeff (did you mean --kl-coef?) 0.1 --totl-steps=3 (did you mean --total-steps?)"
    )
    with pytest.raises(SystemExit):
        main(["serve", "--prot", "9000", "--xyzzy"])
    assert capsys.readouterr().err.splitlines()[-1] == "searchgym serve: error: unrecognized arguments: --prot (did you mean --port?) 9000 --xyzzy"
