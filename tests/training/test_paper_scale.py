"""`searchgym train --preset P --paper-scale`: each paper's training run over its CPU-sized
preset, every value with its source; `--dry-run` prints the resolved flags and trains nothing."""

import dataclasses
import json

import pytest

from searchgym.cli import main
from searchgym.error import ConfigError, UnknownNameError
from searchgym.training.args import PRESETS, Args, check_args, preset
from searchgym.training.paper_scale import DEFAULT_RUNS, PAPER_RUNS, PAPER_SCALE, check_paper_scale, flag_json, paper_scale_args, runs, sources

#: (preset, questions a step, answers a question, sequences an optimizer step, steps, context, observation, turn tokens)
RUNS = [
    ("search-r1-ppo", 512, 1, 256, 1005, 4096, 500, 500),
    ("search-r1-grpo", 512, 5, 256, 1005, 4096, 500, 500),
    ("recon", 512, 1, 256, 1005, 4096, 500, 500),
    ("r1-searcher", 64, 16, 256, 134, 30024, None, 512),
    ("s3", 120, 1, 30, 20, 8000, 1400, 500),
    ("r-search", 256, 5, 256, 195, 8192, 1800, 500),
    ("stepsearch", 128, 1, 32, 1120, None, 800, 800),
    ("autorefine", 256, 5, 256, 300, None, 512, 512),  # 5 updates a step (cmd/train.sh:41, n_agent=5)
    ("zerosearch", 64, 5, 160, 203, 4096, 2048, 500),  # 2 updates a step: the release's 256 + 64 as 160 + 160
    ("parallelsearch", 512, 1, 256, 1005, 5696, 1000, 500),
]


def test_every_preset_has_a_paper_scale_run_of_args_fields_with_sources():
    assert set(PAPER_SCALE) == set(PRESETS)
    fields = {f.name for f in dataclasses.fields(Args)}
    for name, settings in PAPER_SCALE.items():
        assert set(settings) <= fields, name
        for field, setting in settings.items():
            assert setting.source and (setting.quote or setting.source.startswith(("paper silent", "derived"))), (name, field)


@pytest.mark.parametrize("name, questions, n, sequences, steps, context, observation, turn", RUNS, ids=[r[0] for r in RUNS])
def test_the_paper_scale_run_is_the_papers_schedule(name, questions, n, sequences, steps, context, observation, turn):
    args = paper_scale_args(name)
    check_args(args)
    check_paper_scale(args)
    assert (args.questions_per_step, args.n, args.total_steps) == (questions, n, steps)
    assert args.questions_per_step * args.n // args.mini_batches == sequences  # a mini-batch of the paper's size
    assert (args.max_context_tokens, args.max_observation_tokens, args.max_new_tokens) == (context, observation, turn)
    # the rest is the preset's: the CPU-sized preset is still the default
    cpu = preset(name)
    assert (cpu.questions_per_step, cpu.total_steps, cpu.max_context_tokens, cpu.max_observation_tokens) == (4, 100, None, None)
    assert (args.lr, args.kl_coef, args.loss_aggregation, args.env_id) == (cpu.lr, cpu.kl_coef, cpu.loss_aggregation, cpu.env_id)


def test_the_papers_own_choices_ride_along():
    assert paper_scale_args("r1-searcher").stage2_step == 6  # one pass over stage 1's 350 questions, 64 a step
    assert paper_scale_args("r-search").warmup_ratio == 0.95
    assert paper_scale_args("recon").env_options == {"max_turns": 5}  # Alg. 1's budget counts the answer
    assert paper_scale_args("s3").env_options == {"question_filter": "s3"} and paper_scale_args("s3").temperature == 0.6


def test_flags_win_over_the_paper_scale_and_env_options_merge():
    args = paper_scale_args("recon", total_steps=3, env_options={"corpus": "wiki-vital"})
    assert args.total_steps == 3 and args.questions_per_step == 512
    assert args.env_options == {"max_turns": 5, "corpus": "wiki-vital"}
    assert paper_scale_args("recon", env_options={"max_turns": 6}).env_options == {"max_turns": 6}
    with pytest.raises(ConfigError, match=r"^--paper-scale splits a step's 1536 episodes \(questions_per_step \* n\) into 10 mini-batches, which does not divide evenly; pass --mini-batches 2 or a questions_per_step that keeps the paper's mini-batch size\.$"):
        check_paper_scale(paper_scale_args("search-r1-grpo", n=3))


def test_dry_run_prints_the_resolved_flags_as_one_json_object(capsys):
    assert main(["train", "--preset", "s3", "--paper-scale", "--dry-run", "--total-steps", "7"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"--" + f.name.replace("_", "-") for f in dataclasses.fields(Args)}
    assert printed == flag_json(paper_scale_args("s3", total_steps=7))
    assert (printed["--questions-per-step"], printed["--mini-batches"], printed["--total-steps"]) == (120, 4, 7)
    assert (printed["--max-context-tokens"], printed["--max-observation-tokens"]) == (8000, 1400)
    assert printed["--loss-aggregation"] == "seq-mean-token-sum"
    # without --paper-scale it prints the CPU-sized preset
    assert main(["train", "--preset", "s3", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["--questions-per-step"] == 4


@pytest.mark.parametrize("name, questions, n, sequences, steps, context, observation, turn", RUNS, ids=[r[0] for r in RUNS])
def test_dry_run_of_every_paper_prints_its_run_and_names_each_values_source(name, questions, n, sequences, steps, context, observation, turn, capsys):
    assert main(["train", "--preset", name, "--paper-scale", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert (printed["--questions-per-step"], printed["--n"], printed["--total-steps"]) == (questions, n, steps)
    assert printed["--questions-per-step"] * printed["--n"] // printed["--mini-batches"] == sequences
    assert (printed["--max-context-tokens"], printed["--max-observation-tokens"], printed["--max-new-tokens"]) == (context, observation, turn)
    lines = err.splitlines()
    assert lines[0] == f"--paper-scale: {name}'s training run over its preset, each value's source:"
    assert len(lines) == 1 + len(PAPER_SCALE[name])
    for field, setting in PAPER_SCALE[name].items():
        flag = "--" + field.replace("_", "-")
        assert printed[flag] == setting.value, (name, field)
        shown = json.dumps(setting.value) if isinstance(setting.value, dict) else str(setting.value)
        assert f"  {flag} {shown}: {setting.source}" in lines, (name, field)
    # the CPU-sized preset stays the default: without --paper-scale nothing of the paper's run, no sources
    assert main(["train", "--preset", name, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    cpu = json.loads(out)
    assert (cpu["--questions-per-step"], cpu["--total-steps"], cpu["--max-context-tokens"], cpu["--max-observation-tokens"]) == (4, 100, None, None)
    assert err == "" and cpu == flag_json(preset(name))


def test_the_sources_say_which_values_a_flag_replaced():
    lines = sources("r-search", paper_scale_args("r-search", total_steps=7, env_options={"corpus": "wiki-vital"}))
    assert "--total-steps 7: set on the command line (the paper's run: 195, R-Search §4.3: 'a maximum total of 195 training steps')" in lines
    assert "--warmup-ratio 0.95: R-Search §4.3: 'warm-up ratio to 1e-6 and 0.95'" in lines
    recon = sources("recon", paper_scale_args("recon", env_options={"corpus": "wiki-vital"}))
    assert recon[-1].startswith('--env-options {"max_turns": 5, "corpus": "wiki-vital"}: RECON App. C, Alg. 1')
    assert sources("recon", paper_scale_args("recon", env_options={"max_turns": 6}))[-1].startswith(
        '--env-options {"max_turns": 6}: set on the command line (the paper\'s run: {"max_turns": 5}, RECON App. C')
    with pytest.raises(UnknownNameError, match="Unknown paper-scale preset 'recn'. Did you mean 'recon'?"):
        sources("recn", preset("recon"))


def test_paper_scale_needs_a_preset_and_a_bad_combination_fails_before_anything_loads(capsys):
    assert main(["train", "--paper-scale", "--dry-run"]) == 2
    assert "--paper-scale runs a paper's training run; name the paper with --preset (one of" in capsys.readouterr().err
    assert main(["train", "--preset", "r-search", "--paper-scale", "--dry-run", "--eval-temperature", "-1"]) == 2
    assert "Args.eval_temperature expects a number >= 0 (0: greedy), got -1.0." in capsys.readouterr().err
    assert main(["train", "--algorithm", "sb3-ppo", "--dry-run"]) == 2
    assert "--dry-run configures language-model training" in capsys.readouterr().err


#: Search-R1's two released runs (scripts/nq_hotpotqa/ at commit a14dc3a): (run, steps, actor warm-up, critic warm-up,
#: the script's folder). v0.2 is what --paper-scale runs; v0.1 the scripts "Reproduce the paper results" runs.
SEARCH_R1_RUNS = [("v0.2", 1005, 0.285, 0.015), ("v0.1", 305, 0.95, 0.05)]


@pytest.mark.parametrize("run, steps, warmup, value_warmup", SEARCH_R1_RUNS, ids=[r[0] for r in SEARCH_R1_RUNS])
@pytest.mark.parametrize("name", ["search-r1-ppo", "search-r1-grpo"])
def test_search_r1_offers_both_released_runs_each_with_its_scripts_settings(name, run, steps, warmup, value_warmup, capsys):
    grpo = name == "search-r1-grpo"
    assert runs(name) == ("v0.2", "v0.1") and DEFAULT_RUNS[name] == "v0.2"
    args = paper_scale_args(name, run)
    check_args(args)
    check_paper_scale(args)
    # both scripts: 512 questions a step (x 5 for GRPO), mini-batches of 256 sequences, the same token limits
    assert (args.questions_per_step, args.n, args.questions_per_step * args.n // args.mini_batches) == (512, 5 if grpo else 1, 256)
    assert (args.max_context_tokens, args.max_observation_tokens, args.max_new_tokens) == (4096, 500, 500)
    assert (args.total_steps, args.warmup_ratio) == (steps, warmup)
    if not grpo:
        assert args.value_warmup_ratio == value_warmup
    assert args.top_p == 1.0  # kept for exact PPO ratios, where the GRPO and v0.1 scripts sample at verl's 0.95
    script = f"scripts/nq_hotpotqa/{run}/train_{'grpo' if grpo else 'ppo'}.sh"
    settings = PAPER_RUNS[name][run] if run != "v0.2" else PAPER_SCALE[name]
    for field, setting in settings.items():
        assert setting.quote or f"{script}:" in setting.source, (name, run, field)
    # the bare flag is v0.2; naming a run prints its title and each value's source
    assert main(["train", "--preset", name, "--paper-scale", run, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == flag_json(args)
    lines = err.splitlines()
    assert lines[0] == f"--paper-scale {run}: {name}'s training run {run} over its preset, each value's source:"
    line = {"v0.2": 73 if grpo else 82, "v0.1": 78 if grpo else 86}[run]  # the script's line of total_training_steps
    assert f"  --total-steps {steps}: paper silent; Search-R1's released {script}:{line}: trainer.total_training_steps={steps}" in lines
    assert paper_scale_args(name, None) == paper_scale_args(name, "v0.2")
    # a flag still wins over the run
    assert paper_scale_args(name, "v0.1", total_steps=7, warmup_ratio=0.1).total_steps == 7


def test_a_run_name_that_does_not_exist_is_refused_by_name(capsys):
    assert main(["train", "--preset", "search-r1-ppo", "--paper-scale", "v01", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "Unknown paper-scale run of search-r1-ppo 'v01'. Did you mean 'v0.1'? Expected one of: v0.1, v0.2."
    )
    assert main(["train", "--preset", "s3", "--paper-scale", "v0.1", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "--paper-scale v0.1: preset 's3' has one paper-scale run; pass --paper-scale without a name (the presets with "
        "several runs: search-r1-ppo: v0.2, v0.1; search-r1-grpo: v0.2, v0.1)."
    )
    with pytest.raises(UnknownNameError, match=r"^Unknown paper-scale preset 'recn'\. Did you mean 'recon'\?"):
        paper_scale_args("recn", "v0.1")
    assert runs("s3") == ()


def test_every_other_run_is_args_fields_with_sources():
    fields = {f.name for f in dataclasses.fields(Args)}
    assert set(PAPER_RUNS) <= set(DEFAULT_RUNS) <= set(PRESETS)
    for name, named in PAPER_RUNS.items():
        assert DEFAULT_RUNS[name] not in named
        for run, settings in named.items():
            assert set(PAPER_SCALE[name]) <= set(settings) <= fields, (name, run)  # whole: no value of another run's
            for field, setting in settings.items():
                assert setting.quote or setting.source.startswith(("paper silent", "derived")), (name, run, field)
