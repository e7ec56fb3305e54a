"""The prompts the papers print, word for word: Search-R1's Table 1, s3's Fig. 11 and
Fig. 12, R1-Searcher's "System Prompt for Data Selection", RECON's six aspects and its
summarizer's template (App. B.3), R-Search's system template (Table 1) and reader prompt (Table 5).
Each default is checked against the paper's text when ../shared/papers/ is there; the
released wordings stay an option, checked against the text they had."""

import re

import pytest
from env_helpers import make_small
from paper_text import between, needs_papers, normalize, paper_text, squeeze

from searchgym.corpora.types import Hit, Passage, QAExample
from searchgym.envs.components.lm_frozen import R_SEARCH_READER_PROMPT, S3_GENERATOR_PAPER, generator_messages
from searchgym.envs.components.lm_summarizer import ASPECTS, RECON_PROMPT
from searchgym.envs.protocols import make_protocol
from searchgym.envs.protocols.r_search import RSearchProtocol
from searchgym.envs.protocols.r1_searcher import DATA_SELECTION_PROMPT, R1SearcherProtocol
from searchgym.envs.protocols.s3 import S3_LOOP_EXAMPLE, S3_PROMPTS, S3Protocol
from searchgym.envs.protocols.search_r1 import ReconProtocol, SearchR1Protocol
from searchgym.error import UnknownNameError

EXAMPLE = QAExample("q1", "Which river flows through Marrowgate", ("Tesk",), {})
DOCS = [Hit(Passage("p1", "Marrowgate", "Marrowgate lies on the Tesk."), 1.0)]


# ---------------------------------------------------------------- Search-R1, Table 1
@needs_papers
def test_search_r1s_prompt_is_table_1():
    table = between(paper_text("Search-R1"), "observable and unbiased.", "Table 1: Template")
    assert table.endswith("Question: question.")
    prompt = SearchR1Protocol().prompt(QAExample("q", "question", ("a",), {}))
    # Table 1 puts a period after its placeholder; the question brings its own question mark.
    assert squeeze(prompt) == squeeze(table).removesuffix(".") + "?"


def test_the_released_search_r1_wording_is_an_option_and_recon_keeps_it():
    released = SearchR1Protocol(prompt="released").prompt(EXAMPLE)
    assert "as many times as your want." in released and "</answer>, without detailed illustrations" in released
    assert released.endswith("Question: Which river flows through Marrowgate?\n")
    paper = SearchR1Protocol().prompt(EXAMPLE)
    assert "as many times as you want." in paper and "<search> query </search>, and it will return" in paper
    assert ReconProtocol().prompt(EXAMPLE) == released and ReconProtocol(prompt="paper").prompt(EXAMPLE) == paper
    env = make_small("searchgym/SearchR1-v0", protocol_options={"prompt": "released"})
    obs, _ = env.reset(seed=0)
    assert "as many times as your want" in obs
    with pytest.raises(UnknownNameError, match="Unknown SearchR1Protocol prompt 'papers'. Did you mean 'paper'?"):
        make_protocol("search_r1", prompt="papers")


# ---------------------------------------------------------------- s3, Fig. 11 and Fig. 12
@needs_papers
def test_s3s_searcher_prompt_is_fig_11_with_the_released_example_where_it_abbreviates_one():
    figure = between(paper_text("s3"), "Prompt Instructions for Searcher", "Figure 11:")
    before, after = figure.split("[An abstractive example of s3 loop]")
    prompt = squeeze(S3Protocol().prompt(QAExample("q", "{question}", ("a",), {}), []))
    after = after.replace("{initial_search_result}", "").replace("{question}", "{question}?")  # no documents; a question mark added
    assert prompt == squeeze(before) + squeeze(S3_LOOP_EXAMPLE.format()) + squeeze(after)


@needs_papers
def test_s3s_generator_prompt_is_fig_12():
    figure = between(paper_text("s3"), "Prompt for Answer Generation", "Figure 12:")
    assert squeeze(S3_GENERATOR_PAPER) == squeeze(figure)
    (message,) = generator_messages("Which river?", ["Tesk\nThe Tesk is a river."], "paper")
    assert message["role"] == "user" and "Question: Which river?\nImportant:" in message["content"]


def test_the_released_s3_prompt_is_an_option_with_its_own_wording():
    released = S3Protocol(prompt="released").prompt(EXAMPLE, DOCS)
    paper = S3Protocol().prompt(EXAMPLE, DOCS)
    assert released.startswith("You are a search copilot for the generation model.") and "<query> -> <information>" in released
    assert "During the process, you can add reasoning process within <think></think> tag whenever you want." in released
    assert paper.startswith("You are a search copilot for a generation model.") and "<query> \u2192 <information>" in paper
    assert "<think>" not in paper and "A search query must be followed" in paper
    for text in (paper, released):  # both end with the question and the initial documents
        assert text.endswith("<question>\nWhich river flows through Marrowgate?\n</question>\n<information>\nDoc 1 (Title: Marrowgate) Marrowgate lies on the Tesk.\n</information>\n")
    env = make_small("searchgym/S3-v0", protocol_options={"prompt": "released"})
    obs, _ = env.reset(seed=0)
    assert obs.startswith("You are a search copilot for the generation model.")
    with pytest.raises(UnknownNameError, match="Unknown S3Protocol prompt 'fig11'"):
        S3Protocol(prompt="fig11")
    assert set(S3_PROMPTS) == {"paper", "released"}


# ---------------------------------------------------------------- R1-Searcher, §2.1
@needs_papers
def test_r1_searchers_data_selection_prompt_is_the_papers():
    box = between(paper_text("R1-Searcher"), "# System Prompt for Data Selection", "# 2.2 Two-Stage")
    assert '"""' in box  # the box shows the end of a Python string; the prompt leaves it out
    assert squeeze(DATA_SELECTION_PROMPT) == squeeze(box.replace('"""', ""))


def test_the_data_selection_prompt_is_a_system_message_through_the_chat_template():
    protocol = R1SearcherProtocol(prompt="data_selection")
    assert protocol.uses_chat_template and not R1SearcherProtocol().uses_chat_template
    assert protocol.messages(EXAMPLE) == [
        {"role": "system", "content": DATA_SELECTION_PROMPT}, {"role": "user", "content": EXAMPLE.question},
    ]
    assert R1SearcherProtocol().prompt(EXAMPLE).endswith("Assistant: <think>")  # the base prompt, raw text
    env = make_small("searchgym/R1Searcher-v0", protocol_options={"prompt": "data_selection"})
    _, info = env.reset(seed=0)
    assert info["prompt_messages"][0] == {"role": "system", "content": DATA_SELECTION_PROMPT}
    with pytest.raises(UnknownNameError, match="Unknown R1-Searcher prompt 'selection'"):
        R1SearcherProtocol(prompt="selection")


# ---------------------------------------------------------------- RECON, App. B.3
@needs_papers
def test_recons_six_aspects_are_app_b3_word_for_word():
    appendix = between(paper_text("RECON"), "B.3 Prompt Templates", "B.4 Hyperparameters")
    titles = [title for title, _ in ASPECTS.values()]
    assert sorted(titles) == sorted(re.findall(r"• (Clarity|Coherence|Completeness|Coverage|Factual Correctness|Logicality) ", appendix))
    for title, description in ASPECTS.values():
        assert f"• {title} {normalize(description)}" in appendix, title


@needs_papers
def test_recons_summarizer_prompt_is_app_b3s_template():
    """The template App. B.3 prints (its list written as lines starting with "- ")."""
    after_b4 = between(paper_text("RECON"), "B.4 Hyperparameters", "Appendix C")  # the figure lands after B.4's text
    template = after_b4[after_b4.index("You are a helpful assistant in a retrieval-augmented") :]
    documents = "".join(f"[Doc {i}] {{doc_{i}}}\n" for i in (1, 2, 3))
    ours = RECON_PROMPT.format(
        aspect_title="{ASPECT}", aspect_description="{ASPECT EXPLANATION}", user_question="{question}", search_query="{query}", documents=documents,
    )
    assert squeeze(ours.replace("\n- ", "\n")) == squeeze(template)


# ---------------------------------------------------------------- R-Search, Table 1 and Table 5
@needs_papers
def test_r_searchs_system_template_is_table_1_and_its_reader_prompt_table_5():
    text = paper_text("R-Search").replace("\\_", "_")  # the extraction escapes underscores
    table_1 = text[text.index("You are a helpful assistant that can solve") : text.index("Table 1: **System template.**")]
    assert squeeze(RSearchProtocol.system_prompt) == squeeze(table_1)
    table_5 = text[text.index("Answer the question based on the given passages.") : text.index("Table 5: Evidence template.")]
    assert squeeze(R_SEARCH_READER_PROMPT) == squeeze(table_5)
    assert RSearchProtocol().messages(EXAMPLE)[0] == {"role": "system", "content": RSearchProtocol.system_prompt}
