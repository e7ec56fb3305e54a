"""``searchgym view``: the page of bench and training folders, read in headless Chromium.

The browser tests open the written page with ``chromium --headless --dump-dom`` and read
what a person would see: the page's hash (``#view=episodes&failed=1&open=0&docs=1``) sets
its filters and opens an episode, and the dumped DOM is checked. They are skipped where no
Chromium is installed, unless ``SEARCHGYM_REQUIRE_BROWSER=1`` (CI installs it and sets it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from html import unescape
from pathlib import Path

import httpx
import pytest

from searchgym.agents.transcript import CUT_MARK, DOC_CHARS, token_record
from searchgym.bench import BenchConfig, cross, run_bench
from searchgym.cli import main
from searchgym.error import ConfigError, DataFormatError
from searchgym.view import load_runs, render_page, write_page
from searchgym.view.page import embed
from searchgym.view.server import make_server

WORLD = {"*": {"corpus_options": {"seed": 7, "num_passages": 400}}}
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
needs_browser = pytest.mark.skipif(
    BROWSER is None and os.environ.get("SEARCHGYM_REQUIRE_BROWSER") != "1",
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory):
    """A bench of the oracle and the random agent on Search-R1 and s3 (4 questions each)."""
    out = tmp_path_factory.mktemp("bench")
    run_bench(BenchConfig(runs=cross(["SearchR1-v0", "S3-v0"], ["oracle", "random"]), env_options=WORLD, limit=4, num_envs=4), out, progress=False)
    return out


def dump(page: Path, fragment: str = "") -> str:
    """The DOM of ``page`` after its script ran, as headless Chromium serializes it."""
    if BROWSER is None:
        pytest.fail("SEARCHGYM_REQUIRE_BROWSER=1 but no chromium on PATH")
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"{page.resolve().as_uri()}#{fragment}"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-ready="1"' in done.stdout, "the page's script did not finish"
    return done.stdout


def shown(dom: str) -> str:
    """The dumped DOM without the embedded data block (which holds every text once more)."""
    return re.sub(r'<script type="application/json" id="data">.*?</script>', "", dom, flags=re.S)


def count(dom: str) -> int:
    return int(re.search(r'id="count" data-shown="(\d+)"', dom).group(1))


def table_cells(dom: str) -> list[list[str]]:
    body = re.search(r'<table class="summary"><thead>.*?</thead><tbody>(.*?)</tbody>', dom, flags=re.S).group(1)
    return [[unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)] for row in re.findall(r"<tr>(.*?)</tr>", body)]


# ---------------------------------------------------------------- the data
def test_bench_records_keep_every_turn_with_its_searches_and_documents(bench_dir):
    records = [json.loads(line) for line in (bench_dir / "episodes.jsonl").read_text().splitlines()]
    oracle = next(r for r in records if r["run"] == "oracle @ SearchR1-v0")
    prompt, *turns = oracle["turns"]
    assert oracle["question"] in prompt["prompt"] and len(turns) == oracle["num_turns"]
    search = turns[0]["searches"][0]
    assert search["query"] == turns[0]["queries"][0] and len(search["docs"]) == 3
    assert all(d["id"].startswith("sw-") and d["title"] and d["text"] for d in search["docs"])
    assert turns[0]["observation"] is None  # the documents as rendered: not kept twice
    assert turns[-1]["kinds"] == ["answer"] and turns[-1]["reward"] == oracle["reward"]
    # A malformed turn keeps the env's feedback; s3's first documents are in its prompt.
    invalid = [t for r in records for t in r["turns"][1:] if t["invalid_reason"]]
    assert all(t["observation"] for t in invalid)
    s3 = next(r for r in records if r["run"] == "oracle @ S3-v0")
    assert "<information>" in s3["turns"][0]["prompt"]


def test_the_page_data_holds_the_bench_table_and_each_document_once(bench_dir):
    data = load_runs([bench_dir])
    summary = json.loads((bench_dir / "summary.json").read_text())
    folder = data["folders"][0]
    assert folder["kind"] == "bench" and folder["settings"] == summary["config"]
    assert [cells[0] for cells in folder["table"]["cells"]] == [r["label"] for r in summary["runs"]]
    assert len(data["episodes"]) == 16 and [r["label"] for r in data["runs"]] == [r["label"] for r in summary["runs"]]
    keys = [tuple(d) for d in data["docs"]]
    assert len(keys) == len(set(keys))


def test_long_documents_are_cut_with_a_mark():
    from searchgym.agents.transcript import add_documents, turn_entry
    from searchgym.rewards.base import SearchRecord

    turns = [turn_entry("<search>x</search>", "docs", 0.0, {"turn": 1, "query": "x"})]
    add_documents(turns, [SearchRecord(1, 0, "x", ("a",), ("Title\n" + "y" * (DOC_CHARS + 5),))])
    text = turns[0]["searches"][0]["docs"][0]["text"]
    assert text == "y" * DOC_CHARS + CUT_MARK and turns[0]["observation"] == "docs"


def test_token_record_names_what_the_policy_wrote():
    from searchgym.agents.trajectory import Trajectory

    class Pieces:
        def decode(self, ids):
            return f"<{ids[0]}>"

    trajectory = Trajectory((1, 2))
    trajectory.add_generated((3,), (-0.1,), "stop")
    trajectory.add_observation((4, 5))
    assert token_record(trajectory, Pieces()) == [["prompt", ["<1>", "<2>"]], ["generated", ["<3>"]], ["observation", ["<4>", "<5>"]]]


def test_the_embedded_data_cannot_end_its_script_element():
    page = render_page({"folders": [], "runs": [], "docs": [["x", "</script><script>alert(1)</script>", "<!-- \u2028"]], "episodes": [],
                        "nan": float("nan")})
    block = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, flags=re.S).group(1)
    assert "<" not in block and "\u2028" not in block
    assert json.loads(block)["docs"][0][1] == "</script><script>alert(1)</script>" and json.loads(block)["nan"] is None
    assert embed({"a": "<b>"}) == '{"a":"\\u003cb>"}'


def test_folders_that_are_not_runs_are_refused_with_what_to_pass(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_runs([tmp_path])
    assert str(e.value) == (
        f"searchgym view expects a run folder: a bench folder (episodes.jsonl, summary.json) or a training folder "
        f"(args.json, metrics.csv), got {str(tmp_path)!r}, which holds neither; pass the --out folder of searchgym bench or train."
    )
    with pytest.raises(ConfigError, match="no such folder"):
        load_runs([tmp_path / "missing"])
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(DataFormatError):
        load_runs([tmp_path])


def test_cli_writes_the_page_and_says_its_size(bench_dir, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["view", str(bench_dir), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out} (") and "16 episodes of 1 folder" in said and out.as_uri() in said
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert "searchgym view: error: searchgym view expects a run folder" in capsys.readouterr().err


def test_the_server_answers_the_page_and_json_errors_on_loopback():
    server = make_server("<html>page</html>", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(base + "/").text == "<html>page</html>"
        missing = httpx.get(base + "/episodes.jsonl")
        assert missing.status_code == 404 and "serves one page at /" in missing.json()["error"]
        posted = httpx.post(base + "/", content=b"x" * 10)
        assert posted.status_code == 405 and posted.json() == {"error": "searchgym view answers GET / only, got POST."}
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- in the browser
@needs_browser
def test_the_table_a_person_sees_is_the_bench_table(bench_dir, tmp_path):
    page, _ = write_page([bench_dir], tmp_path / "view.html")
    dom = dump(page)
    summary = json.loads((bench_dir / "summary.json").read_text())
    from searchgym.bench import BenchResults

    markdown = BenchResults(BenchConfig(runs=[("SearchR1-v0", "oracle")]), summary["runs"], {}).markdown()
    expected = [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()[2:]]
    assert table_cells(dom) == expected
    assert dom.count('class="chart chart-reward"') == 1 and "settings" in dom


@needs_browser
def test_an_opened_episode_shows_its_turns_and_documents(bench_dir, tmp_path):
    page, data = write_page([bench_dir], tmp_path / "view.html")
    first = data["episodes"][0]
    dom = shown(dump(page, "view=episodes&open=0&docs=1"))
    assert 'class="detail"' in dom and unescape(dom).count(first["question"]) >= 2  # the row and the opened episode
    doc_ids = [d for t in first["turns"][1:] for s in t["searches"] for d in s["docs"]]
    for index in doc_ids:
        doc_id, title, text = data["docs"][index]
        assert f'title="{doc_id}">{title}</button>' in dom and text[:60] in unescape(dom)
    # Titles first, texts on demand: without docs=1 no text is drawn.
    closed = shown(dump(page, "view=episodes&open=0"))
    assert 'class="doc-title"' in closed and 'class="doc-text"' not in closed


@needs_browser
def test_filters_change_the_count_as_the_data_says(bench_dir, tmp_path):
    page, data = write_page([bench_dir], tmp_path / "view.html")
    episodes = data["episodes"]
    assert count(dump(page, "view=episodes")) == len(episodes) == 16
    never = sum(ep["num_searches"] == 0 for ep in episodes)
    in_form = sum(ep["outcome"] in ("answered", "completed") and ep["num_invalid"] == 0 for ep in episodes)
    paid = sum(ep["reward"] >= 0.5 for ep in episodes)
    s3 = sum(data["runs"][ep["run"]]["env"] == "S3-v0" for ep in episodes)
    assert count(dump(page, "view=episodes&nosearch=1")) == never
    assert count(dump(page, "view=episodes&inform=1")) == in_form < 16
    assert count(dump(page, "view=episodes&min=0.5")) == paid < 16
    assert count(dump(page, "view=episodes&env=S3-v0&agent=oracle")) == s3 // 2 == 4
    assert count(dump(page, "view=episodes&failed=1")) == 0
    rewards = re.findall(r'<tr class="row" id="ep-\d+" data-reward="([-\d.e]+)"', dump(page, "view=episodes&sort=reward-asc"))
    assert [float(r) for r in rewards] == sorted(ep["reward"] for ep in episodes)


@needs_browser
def test_runs_line_up_per_question_side_by_side(bench_dir, tmp_path):
    page, data = write_page([bench_dir], tmp_path / "view.html")
    dom = dump(page, "view=compare")
    assert count(dom) == 4 and dom.count('class="compare-row"') == 4  # both envs ask the same 4 questions, every run played them
    rights = {r["label"]: sum(ep["em"] >= 1 for ep in data["episodes"] if data["runs"][ep["run"]]["label"] == r["label"]) for r in data["runs"]}
    for label, n in rights.items():
        assert f"{label}: {n} right" in unescape(dom)
    cells = re.findall(r'<td class="(right|wrong)" title="reward [-\d.]+">', dom)
    assert len(cells) == 16 and cells.count("right") == sum(rights.values())
    assert count(dump(page, "view=compare&disagree=1")) == 4  # the oracle answers each, the random agent on Search-R1 none


@needs_browser
def test_a_hostile_document_stays_text(bench_dir, tmp_path):
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    for name in ("config.json", "summary.json"):
        shutil.copy(bench_dir / name, hostile / name)
    record = json.loads((bench_dir / "episodes.jsonl").read_text().splitlines()[0])
    record["question"] = "</script><script>document.title='pwned'</script> " + record["question"]
    record["prediction"] = HOSTILE
    record["turns"][1]["searches"][0]["docs"][0]["text"] = HOSTILE
    record["turns"][1]["text"] = HOSTILE
    (hostile / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    page, _ = write_page([hostile], tmp_path / "hostile.html")
    dom = dump(page, "view=episodes&open=0&docs=1")
    assert "<title>searchgym view</title>" in dom and "pwned</title>" not in dom
    visible = shown(dom)
    assert "<img" not in visible and visible.count("&lt;script&gt;document.title=\"pwned\"&lt;/script&gt;") >= 3
    assert "<script>document.title" not in dom


@needs_browser
def test_a_training_folder_shows_its_curves_and_the_tokens_by_loss_mask(bench_dir, tmp_path):
    run = tmp_path / "train"
    (run / "eval").mkdir(parents=True)
    shutil.copytree(bench_dir, run / "eval" / "step-000002")
    (run / "args.json").write_text(json.dumps({"algorithm": "grpo", "env_id": "searchgym/SearchR1-v0"}))
    (run / "metrics.csv").write_text("step,reward,loss\n0,,\n1,0.25,0.5\n2,0.75,0.25\n")
    record = json.loads((bench_dir / "episodes.jsonl").read_text().splitlines()[0])
    tokens = [["prompt", ["Question", ":"]], ["generated", ["<search>", " x"]], ["observation", ["<information>"]], ["generated", ["<answer>"]]]
    (run / "rollouts.jsonl").write_text(json.dumps({**record, "run": "training rollouts", "step": 1, "tokens": tokens}) + "\n")
    page, data = write_page([run], tmp_path / "train.html")
    rollouts = next(i for i, r in enumerate(data["runs"]) if r["label"] == "training rollouts")
    assert data["folders"][0]["table"]["cells"][0][0] == "2"  # the evaluation's rows, by step
    curves = dump(page)
    assert 'data-series="reward"' in curves and 'data-series="loss"' in curves
    dom = shown(dump(page, f"view=episodes&run={rollouts}&open=0"))
    spans = re.findall(r'<span class="(prompt|generated|observation)" title="loss_mask ([01])">(.*?)</span>', dom)
    assert [(kind, mask, unescape(text)) for kind, mask, text in spans] == [
        ("prompt", "0", "Question"), ("prompt", "0", ":"), ("generated", "1", "<search>"), ("generated", "1", " x"),
        ("observation", "0", "<information>"), ("generated", "1", "<answer>"),
    ]


@needs_browser
def test_a_tool_call_turn_shows_its_calls(tmp_path):
    out = tmp_path / "tools"
    run_bench(BenchConfig(runs=[("SearchR1-v0", "oracle")], env_options={"*": {**WORLD["*"], "action_format": "tools"}}, limit=1), out, progress=False)
    page, data = write_page([out], tmp_path / "tools.html")
    episode = data["episodes"][0]
    compact = lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False)  # noqa: E731 (as JSON.stringify writes it)
    expected = [f"search({compact({'query': q})})" for turn in episode["turns"][1:] for q in turn["queries"]]
    expected.append(f"answer({compact({'answer': episode['prediction']})})")
    dom = shown(dump(page, "view=episodes&open=0"))
    assert [unescape(c) for c in re.findall(r'<li class="tool-call"><code>(.*?)</code>', dom)] == expected
    assert len(expected) == episode["num_searches"] + 1


# ---------------------------------------------------------------- the browse game's trail
class BrowseTrail:
    """A scripted deep-research episode: a search, an open and a find in one turn, then an answer
    citing one evidence document and one that is not."""

    @staticmethod
    def agent():
        from searchgym.agents import Agent
        from searchgym.deepresearch import CitedAnswer, DeepResearchProtocol, Find, Open
        from searchgym.envs.protocols import Search
        from searchgym.envs.tools.surface import ToolSurface

        class Trail(Agent):
            name = "trail"

            def act(self, observations, infos):
                surface = ToolSurface(DeepResearchProtocol())
                turns = [[Search("Velmora chronicler")], [Open("t0", 2), Find("g0", "founded by")],
                         [CitedAnswer("Ilsa Marrowgate", ("t0", "p1"), 80.0)]]
                return [surface.write(turns[min(info["turn"], 2)], turn=info["turn"]) for info in infos]

        return Trail()


@pytest.fixture(scope="module")
def browse_dir(tmp_path_factory):
    """A bench of one scripted deep-research episode (question q0: evidence t0 and g0, gold p0)."""
    from deepresearch.small_world import env_options

    tmp = tmp_path_factory.mktemp("browse")
    out = tmp / "bench"
    run_bench(BenchConfig(runs=[("DeepResearch-v0", BrowseTrail.agent())], env_options={"DeepResearch-v0": env_options(tmp)}, limit=1),
              out, progress=False)
    return out


def test_a_browse_episode_records_its_reads_and_the_page_data_checks_its_citations(browse_dir):
    record = json.loads((browse_dir / "episodes.jsonl").read_text().splitlines()[0])
    prompt, search, reads, answer = record["turns"]
    assert prompt["labels"] == {"evidence_ids": ["t0", "g0"], "gold_ids": ["p0"]}
    assert [d["id"] for d in search["searches"][0]["docs"]] and "calls" not in search
    opened, found = reads["calls"]
    assert opened == {"kind": "open", "doc_id": "t0", "page": 2, "title": "Velmora", "pages": 3}
    assert found["kind"] == "find" and found["pattern"] == "founded by" and found["title"] == "Amber Compass Society"
    assert found["total"] == 1 and found["places"][0][0] >= 2 and "founded by Ilsa Marrowgate" in found["places"][0][1]
    assert answer["calls"] == [{"kind": "answer", "answer": "Ilsa Marrowgate", "citations": ["t0", "p1"], "confidence": 80.0}]
    data = load_runs([browse_dir])
    episode = data["episodes"][0]
    assert episode["citations"] == [
        {"id": "t0", "mark": "cited-and-evidence", "title": "Velmora"},
        {"id": "p1", "mark": "cited-not-evidence", "title": next((d[1] for d in data["docs"] if d[0] == "p1"), None)},
        {"id": "g0", "mark": "evidence-not-cited", "title": "Amber Compass Society"},
        {"id": "p0", "mark": "evidence-not-cited", "title": next((d[1] for d in data["docs"] if d[0] == "p0"), None)},
    ]
    headers = data["folders"][0]["table"]["headers"]
    assert headers[headers.index("accuracy"):headers.index("reward")] == [
        "accuracy", "evidence recall", "gold recall", "citation precision", "citation recall", "calls", "calibration error"]


def test_citation_marks_need_the_labels():
    from searchgym.view.load import citation_marks

    assert citation_marks([{"prompt": "p"}, {"turn": 1, "calls": [{"kind": "answer", "citations": ["a"]}]}]) is None
    turns = [{"prompt": "p", "labels": {"evidence_ids": ["a", "b"], "gold_ids": ["c"]}},
             {"turn": 1, "searches": [{"query": "q", "docs": [{"id": "b", "title": "B"}]}]},
             {"turn": 2, "calls": [{"kind": "answer", "answer": "x", "citations": ["a", "z", "a"], "confidence": None}]}]
    assert citation_marks(turns) == [
        {"id": "a", "mark": "cited-and-evidence", "title": None}, {"id": "z", "mark": "cited-not-evidence", "title": None},
        {"id": "b", "mark": "evidence-not-cited", "title": "B"}, {"id": "c", "mark": "evidence-not-cited", "title": None},
    ]
    # An episode that never answered cited nothing: every evidence document is not cited.
    assert [m["mark"] for m in citation_marks(turns[:2])] == ["evidence-not-cited"] * 3


@needs_browser
def test_a_browse_episode_shows_its_trail_and_its_citations_checked(browse_dir, tmp_path):
    page, data = write_page([browse_dir], tmp_path / "browse.html")
    dom = unescape(shown(dump(page, "view=episodes&open=0")))
    assert 'class="call call-open"' in dom and re.search(r"open: <code>\[t0\]</code> Velmora<span class=\"page\"> — page 2 of 3</span>", dom)
    find = re.search(r'<div class="call call-find">(.*?)</div>', dom, flags=re.S).group(1)
    assert "<q>founded by</q>" in find and "[g0]</code> Amber Compass Society" in find and "— 1 place" in find
    assert re.search(r'<li class="place">page \d+: <span class="muted">[^<]*founded by Ilsa Marrowgate', find)
    assert re.search(r'<div class="call call-answer">answer: <q>Ilsa Marrowgate</q><span class="muted"> · confidence 80 · cites t0, p1</span>', dom)
    marks = re.findall(r'<li class="citation ([a-z-]+)" data-mark="\1"><code>(.*?)</code>', dom)
    assert marks == [("cited-and-evidence", "t0"), ("cited-not-evidence", "p1"), ("evidence-not-cited", "g0"), ("evidence-not-cited", "p0")]
    # The search's hits are listed with their ids and titles.
    hits = data["episodes"][0]["turns"][1]["searches"][0]["docs"]
    for index in hits:
        doc_id, title, _ = data["docs"][index]
        assert f'title="{doc_id}">{title}</button>' in dom
    # The runs' table is the bench's, browse columns included.
    from searchgym.bench import BenchResults

    summary = json.loads((browse_dir / "summary.json").read_text())
    markdown = BenchResults(BenchConfig(runs=[("DeepResearch-v0", "oracle")]), summary["runs"], {}).markdown()
    assert table_cells(dump(page)) == [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()[2:]]
    assert "evidence recall" in markdown.splitlines()[0]


# ---------------------------------------------------------------- a row whose every episode failed
@pytest.fixture(scope="module")
def down_dir(tmp_path_factory):
    """docs/bench.md's bench against a server that is not running: the lm row's every
    episode failed (backend_error), the oracle's row played."""
    import socket

    from searchgym.lm.testing import tiny_model_folder

    with socket.socket() as s:  # a port on 127.0.0.1 nobody listens on (bound, then closed)
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    out = tmp_path_factory.mktemp("bench-down")
    code = main(["bench", "--run", "SearchR1-v0:lm", "--run", "SearchR1-v0:oracle", "--limit", "2", "--backend", "openai",
                 "--model", str(tiny_model_folder()), "--backend-option", f"base_url={url}", "--backend-option", "max_retries=0",
                 "--corpus-option", "seed=7", "--corpus-option", "num_passages=400", "--out", str(out), "--quiet"])
    assert code == 1  # every episode of a row failed
    return out


def test_failed_episodes_are_recorded_unscored_and_the_page_data_shows_no_reward(down_dir, tmp_path):
    records = [json.loads(line) for line in (down_dir / "episodes.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["run"] == "lm @ SearchR1-v0"]
    assert [(r["outcome"], r["reward"]) for r in failed] == [("backend_error", None)] * 2  # null, as summary.json's row
    assert json.loads((down_dir / "summary.json").read_text())["runs"][0]["reward"] is None
    data = load_runs([down_dir])
    folder = data["folders"][0]
    reward = folder["table"]["headers"].index("reward")
    assert [cells[reward] for cells in folder["table"]["cells"]] == ["-", "1.000"]
    assert [c["reward"] for c in folder["chart"]] == [None, 1.0] and folder["chart"][0]["failures"] == 2.0
    assert folder["notes"][-1].startswith("lm @ SearchR1-v0: 2 of 2 episodes failed (backend_error 2), not answered; first error: The server at")
    assert [ep["reward"] for ep in data["episodes"] if ep["outcome"] == "backend_error"] == [None, None]
    # A folder written before (a failed episode recorded with reward 0.0) reads as before.
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text((down_dir / "config.json").read_text())
    (old / "episodes.jsonl").write_text("".join(json.dumps({**r, "reward": r["reward"] if r["reward"] is not None else 0.0}) + "\n" for r in records))
    again = load_runs([old])  # no summary.json: the rows are summarized from the episodes
    assert [cells[reward] for cells in again["folders"][0]["table"]["cells"]] == ["-", "1.000"]
    assert [ep["reward"] for ep in again["episodes"] if ep["outcome"] == "backend_error"] == [0.0, 0.0]


@needs_browser
def test_the_page_of_a_row_that_failed_shows_a_dash_and_the_failure(down_dir, tmp_path, capsys):
    page = tmp_path / "down.html"
    assert main(["view", str(down_dir), "-o", str(page)]) == 0  # the command the bench's last line names
    assert "4 episodes of 1 folder" in capsys.readouterr().out
    dom = unescape(shown(dump(page)))
    cells = table_cells(dump(page))
    reward = load_runs([down_dir])["folders"][0]["table"]["headers"].index("reward")
    assert cells[0][0] == "lm @ SearchR1-v0" and cells[0][-1] == "backend_error 2" and cells[0][reward] == "-"
    assert '<p class="note error">lm @ SearchR1-v0: 2 of 2 episodes failed (backend_error 2), not answered; first error: The server at' in dom
    chart = re.search(r'class="chart chart-reward">(.*?)</svg>', dom, flags=re.S).group(1)
    assert chart.count("<rect") == 1 and ">-<title>lm @ SearchR1-v0</title>" in chart  # no bar for the failed row
    opened = unescape(shown(dump(page, "view=episodes&failed=1&open=0")))
    assert count(opened) == 2 and "<b>reward: </b>-" in opened and "backend_error: The server at" in opened
