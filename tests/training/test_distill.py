"""RECON's summarizer training: relevance pretraining, then distillation of a teacher's
summaries, on the tiny model; the result is the env's summarizer."""

import re

import pytest

from env_helpers import SMALL_WORLD, make_small, search_turn
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_model_folder, tiny_tokenizer
from searchgym.training.distill import DistillArgs, distill_summarizer, relevance_groups, summary_loss, summary_rows
from searchgym.error import ConfigError, UnknownNameError

ENV_OPTIONS = {"corpus_options": SMALL_WORLD, "top_k": 2}


def first_doc_teacher():
    """A teacher that summarizes with the first 60 characters of the prompt's first document."""
    calls = []

    def reply(prompt):
        calls.append(prompt)
        return re.search(r"\[Doc 1\] (.{1,60})", prompt).group(1)

    return ScriptedLM(reply, tiny_tokenizer()), calls


#: searchgym's settings before the paper's became the defaults: the question's retrieval,
#: every weight trained, four examples a step and a pass, no warm-up.
EARLIER = dict(queries="question", lora_rank=0, micro_batch_size=4, warmup_ratio=None)


def args(tmp_path, **kw):
    settings = dict(
        env_options=ENV_OPTIONS, limit=2, student=str(tiny_model_folder()), aspects=["clarity", "coverage"],
        relevance_epochs=1, relevance_candidates=4, relevance_max_tokens=64, epochs=3, batch_size=4, lr=1e-3,
        out=str(tmp_path / "run"), progress=False, **EARLIER,
    )
    return DistillArgs(**{**settings, **kw})


def test_distilled_summarizer_learns_the_teachers_summaries_and_serves_as_the_envs_summarizer(tmp_path):
    from searchgym.training.trainer import load_policy

    teacher, calls = first_doc_teacher()
    a = args(tmp_path)
    result = distill_summarizer(a, teacher=teacher)
    # one teacher summary per question and aspect, each prompt holding the user's question and an aspect
    assert result["summaries"] == 4 == len(calls) and result["trained_summaries"] == 4
    assert all("User Question: " in c for c in calls) and sum("Focus Aspect: Coverage" in c for c in calls) == 2
    stages = [r["stage"] for r in result["rows"]]
    assert stages[0] == "relevance" and stages[-1] == "distill" and result["relevance_groups"] >= 1
    # the student's loss on the teacher's summaries fell
    import json

    import gymnasium as gym
    import torch

    from searchgym.envs.access import search_env

    records = [json.loads(line) for line in (tmp_path / "run" / "teacher.jsonl").read_text().splitlines()]
    env = gym.make("searchgym/RECON-v0", split="train", **ENV_OPTIONS)
    examples = {ex.id: ex for ex in search_env(env).examples}
    hits = {(i, examples[i].question): search_env(env).retriever.search([examples[i].question], 2)[0] for i in {r["id"] for r in records}}
    before_model, tokenizer = load_policy(a.student)
    after_model, _ = load_policy(str(tmp_path / "run" / "final"))
    rows, _ = summary_rows(tokenizer, records, hits, 2048)

    with torch.no_grad():
        before = float(summary_loss(before_model, rows, tokenizer.pad_token_id)[0])
        after = float(summary_loss(after_model, rows, tokenizer.pad_token_id)[0])
    assert after < before - 0.5
    # the saved folder is the env's summarizer
    recon = make_small("searchgym/RECON-v0", top_k=2, summarizer="llm", summarizer_options={"model": str(tmp_path / "run" / "final"), "max_new_tokens": 8})
    recon.reset(seed=0)
    obs, *_ = recon.step(search_turn(recon, "founded city"))
    assert obs.startswith("\n\n<information>") and obs.endswith("</information>\n\n") and len(obs) > len("\n\n<information></information>\n\n")


def test_relevance_groups_need_a_relevant_and_an_irrelevant_candidate():
    from searchgym.corpora.types import Hit, Passage, QAExample

    ex = QAExample("q1", "Which river?", ("Tesk",), {})
    hit = lambda text: Hit(Passage(text[:3], "T", text), 1.0)  # noqa: E731
    assert relevance_groups([ex], [[hit("on the Tesk"), hit("a city"), hit("the Tesk again")]]) == [
        ("Which river?", ["T: on the Tesk", "T: a city", "T: the Tesk again"], [0, 2])
    ]
    assert relevance_groups([ex, ex], [[hit("a city"), hit("a town")], [hit("Tesk"), hit("the Tesk")]]) == []


def test_bad_distill_arguments_say_how_to_fix_them(tmp_path):
    teacher, _ = first_doc_teacher()
    with pytest.raises(UnknownNameError, match="Unknown summary aspect 'clearity'. Did you mean 'clarity'?"):
        distill_summarizer(DistillArgs(aspects=["clearity"]), teacher=teacher)
    with pytest.raises(ConfigError, match=r"^DistillArgs.relevance_candidates expects an integer >= 2 \(one relevant among others\), got 1.$"):
        distill_summarizer(DistillArgs(relevance_candidates=1), teacher=teacher)
    silent = ScriptedLM(lambda prompt: "", tiny_tokenizer())
    with pytest.raises(ConfigError, match=r"^The teacher wrote no usable summary for the 2 questions of searchgym/RECON-v0 \(train\); check the teacher model.$"):
        distill_summarizer(args(tmp_path), teacher=silent)


def test_a_stopped_teacher_pass_keeps_its_summaries_and_a_rerun_asks_only_the_rest(tmp_path):
    import gymnasium as gym

    from searchgym.envs.access import search_env
    from searchgym.training.distill import question_retrievals, read_teacher_file, teacher_summaries

    env = gym.make("searchgym/RECON-v0", split="train", **ENV_OPTIONS)
    examples = list(search_env(env).examples[:3])
    items = question_retrievals(env, examples, 2)
    aspects = ["clarity", "coverage"]
    settings = dict(max_new_tokens=16, batch_size=2, seed=0)
    teacher, calls = first_doc_teacher()
    whole = teacher_summaries(teacher, items, aspects, **settings)
    assert len(whole) == 6 == len(calls)

    class Stopped(Exception):
        pass

    def stop_after_two(prompt):
        if len(seen) == 2:
            raise Stopped
        seen.append(prompt)
        return re.search(r"\[Doc 1\] (.{1,60})", prompt).group(1)

    seen: list[str] = []
    path = tmp_path / "teacher.jsonl"
    with path.open("w") as sink, pytest.raises(Stopped):
        teacher_summaries(ScriptedLM(stop_after_two, tiny_tokenizer()), items, aspects, sink=sink, **settings)
    with path.open("a") as f:
        f.write('{"id": "torn')  # a line cut short by the stop
    done = read_teacher_file(path)
    assert done == whole[:2]
    teacher, calls = first_doc_teacher()
    assert teacher_summaries(teacher, items, aspects, done=done, **settings) == whole
    assert len(calls) == 4  # only the pairs the stopped pass lacked


def test_a_teacher_file_that_covers_every_pair_trains_without_loading_the_teacher(tmp_path):
    teacher, _ = first_doc_teacher()
    first = distill_summarizer(args(tmp_path, relevance_epochs=0, epochs=1), teacher=teacher)
    again = args(tmp_path, relevance_epochs=0, epochs=1, teacher="no-such-teacher", teacher_file=str(tmp_path / "run" / "teacher.jsonl"), out=str(tmp_path / "again"))
    result = distill_summarizer(again)
    assert result["summaries"] == first["summaries"] == 4
    assert (tmp_path / "again" / "teacher.jsonl").read_text() == (tmp_path / "run" / "teacher.jsonl").read_text()
    assert (tmp_path / "again" / "final" / "config.json").is_file()


def test_a_bad_teacher_file_says_what_it_expects(tmp_path):
    from searchgym.training.distill import read_teacher_file

    with pytest.raises(ConfigError, match=r"^DistillArgs.teacher_file expects the teacher.jsonl of an earlier distill-summarizer run, but .*nothing.jsonl is not a file.$"):
        read_teacher_file(tmp_path / "nothing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('not json\n{"id": "q", "aspect": "clarity", "summary": "s"}\n')
    with pytest.raises(ConfigError, match=r"^DistillArgs.teacher_file: line 1 of .*bad.jsonl is not JSON \(.*\); pass a teacher.jsonl written by distill-summarizer.$"):
        read_teacher_file(bad)
    bad.write_text('{"id": "q", "summary": "s"}\n')
    with pytest.raises(ConfigError, match=r"^DistillArgs.teacher_file: line 1 of .*bad.jsonl lacks aspect; pass a teacher.jsonl written by distill-summarizer.$"):
        read_teacher_file(bad)


def test_the_defaults_are_the_papers_distillation_settings():
    a = DistillArgs()
    # App. B.4: LoRA rank 8, alpha 32, all linear layers; lr 1e-4; effective batch 16 (1 x 16); 5% warm-up; 1 epoch.
    assert (a.lora_rank, a.lora_alpha, a.lora_targets) == (8, 32.0, ["all-linear"])
    assert (a.lr, a.batch_size, a.micro_batch_size, a.warmup_ratio, a.epochs) == (1e-4, 16, 1, 0.05, 1)
    # App. B.2: the queries of a searcher's rollouts, with all six aspects.
    assert a.queries == "rollouts" and len(a.aspects) == 6


def test_queries_come_from_the_searchers_rollouts_and_lora_is_merged_into_the_saved_model(tmp_path):
    import json

    import torch

    from searchgym.training.trainer import load_policy

    teacher, calls = first_doc_teacher()
    a = args(
        tmp_path, queries="rollouts", searcher="oracle", lora_rank=8, batch_size=8, micro_batch_size=8, warmup_ratio=0.05,
        lr=1e-2, relevance_epochs=0, epochs=1, aspects=["clarity"],
    )
    result = distill_summarizer(a, teacher=teacher)
    records = [json.loads(line) for line in (tmp_path / "run" / "teacher.jsonl").read_text().splitlines()]
    # the oracle's queries (not the questions), each distinct (question, query) once
    assert records and all(r["query"] != r["question"] for r in records)
    assert len({(r["id"], r["query"]) for r in records}) == len(records) == result["queries"] == result["summaries"] == len(calls)
    assert all(f"Search Query (used by the retriever): {r['query']}" in c for r, c in zip(records, calls))
    # 5% warm-up of the run's optimizer steps: int(0.05 * steps) is 0 here, so the first step is at the peak
    first = result["rows"][0]
    assert first["stage"] == "distill" and first["lr"] <= 1e-2
    # the LoRA adapters are merged: a plain transformers folder whose weights moved
    before, _ = load_policy(a.student)
    after, _ = load_policy(str(tmp_path / "run" / "final"))
    assert not any("lora" in name for name in after.state_dict())
    moved = [n for n, p in after.state_dict().items() if not torch.equal(p, before.state_dict()[n])]
    assert moved and all("proj" in n for n in moved)  # only the adapted linear layers changed


def test_a_searcher_that_never_searches_gives_no_query_and_says_what_to_use(tmp_path):
    teacher, _ = first_doc_teacher()
    answers_at_once = ScriptedLM(lambda prompt: "<answer> a city </answer>", tiny_tokenizer())
    with pytest.raises(ConfigError, match=r"^The searcher 'smollm2' made no search on the 2 questions of searchgym/RECON-v0 \(train\), so there is no query to summarize; use a searcher that searches \(a trained Search-R1 policy, or 'oracle' on synthwiki\) or queries='question'.$"):
        distill_summarizer(args(tmp_path, queries="rollouts"), teacher=teacher, searcher=answers_at_once)
    with pytest.raises(UnknownNameError, match="Unknown distillation query source 'questions'. Did you mean 'question'?"):
        distill_summarizer(DistillArgs(queries="questions"), teacher=teacher)
    with pytest.raises(ConfigError, match=r"^DistillArgs.warmup_ratio expects a fraction of the stage's optimizer steps in \[0, 1\) or None, got 1.5.$"):
        distill_summarizer(DistillArgs(warmup_ratio=1.5), teacher=teacher)


def test_micro_batches_add_up_to_the_step_of_the_whole_batch(tmp_path):
    """The paper's 16 examples a step, one per forward pass: the accumulated gradients of the
    micro-batches are the whole batch's mean-loss gradient, so the step is the same."""
    import torch

    from searchgym.training.distill import train_stage

    class Log:
        def log(self, row):
            pass

    data = [(torch.randn(3), torch.randn(())) for _ in range(6)]

    def run(micro):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        loss_of = lambda batch: torch.stack([(model(x).squeeze() - y) ** 2 for x, y in batch]).mean()  # noqa: E731
        a = DistillArgs(micro_batch_size=micro, lr=0.1, warmup_ratio=None, progress=False)
        rows = train_stage(model, list(model.parameters()), [data], loss_of, args=a, stage="distill", log=Log(), epochs=1)
        return rows[0]["loss"], [p.detach().clone() for p in model.parameters()]

    whole_loss, whole = run(6)
    for micro in (1, 4):
        loss, params = run(micro)
        assert loss == pytest.approx(whole_loss)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(params, whole))


def test_the_help_shows_the_papers_settings(capsys):
    from searchgym.cli import main

    with pytest.raises(SystemExit) as done:
        main(["distill-summarizer", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(the paper's 5%); None: warmup_steps. (default: 0.05)" in text and "--searcher" in text and "--queries" in text
