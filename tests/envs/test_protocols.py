"""Each protocol's grammar: parse is the inverse of write, and the original repositories' parsing rules."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from searchgym.corpora.types import Hit, Passage, QAExample
from searchgym.envs.protocols import (
    PROTOCOLS,
    Answer,
    Complete,
    Evidence,
    Invalid,
    Search,
    Select,
    make_protocol,
)
from searchgym.error import ConfigError

EXAMPLE = QAExample("q1", "Who founded Kelvaro Industries?", ("Ilvar Odrenko",))
HITS = [Hit(Passage("a", "Kelvaro Industries", "Founded in 1872 by Ilvar Odrenko."), 2.0),
        Hit(Passage("b", "Marrowdale", "A city."), 1.0)]

# Text the grammar can carry: no tag characters or quotes, single spaces (R1-Searcher collapses them).
phrases = st.text(st.characters(blacklist_characters="<>|{}[]\"\\", blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(
    lambda s: s.strip() and s == " ".join(s.split())
)


def turns_for(name):
    if name == "s3":
        return st.one_of(
            st.builds(lambda q: (Search(q),), phrases),
            st.builds(lambda ns, q: (Select(tuple(ns)), Search(q)), st.lists(st.integers(1, 9), max_size=3), phrases),
            st.builds(lambda ns: (Select(tuple(ns)), Complete()), st.lists(st.integers(1, 9), max_size=3)),
            st.just((Complete(),)),
        )
    if name == "r_search":
        return st.one_of(
            st.builds(lambda q: (Search(q),), phrases),
            st.builds(lambda a: (Answer(a),), phrases),
            st.builds(lambda e, a: (Evidence(e), Answer(a)), phrases, phrases),
        )
    return st.one_of(st.builds(lambda q: (Search(q),), phrases), st.builds(lambda a: (Answer(a),), phrases))


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
@given(data=st.data())
def test_parse_inverts_write(name, data):
    protocol = make_protocol(name)
    actions = data.draw(turns_for(name))
    thought = data.draw(st.one_of(st.none(), phrases))
    parsed = protocol.parse(protocol.write(actions, thought=thought))
    assert parsed.actions == actions and parsed.well_formed and not parsed.forged_env_tags


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_prompt_holds_the_question_and_rendering_keeps_the_docs_in_rank_order(name):
    protocol = make_protocol(name)
    prompt = protocol.prompt(EXAMPLE, HITS if protocol.initial_retrieval else None)
    assert EXAMPLE.question in prompt
    if protocol.initial_retrieval:  # s3: the initial documents follow the question, in rank order
        after = prompt.index(EXAMPLE.question) + len(EXAMPLE.question)
        assert after < prompt.index("Founded in 1872 by Ilvar Odrenko.") < prompt.index("A city.")
    else:
        assert "Ilvar Odrenko" not in prompt
    rendered = protocol.render_docs(HITS)
    assert rendered.index("Kelvaro Industries") < rendered.index("Founded in 1872") < rendered.index("Marrowdale")
    for open_tag, close_tag in protocol.env_tags:
        assert open_tag in rendered and close_tag in rendered


def test_search_r1_takes_the_first_closed_block_and_its_doc_format():
    p = make_protocol("search_r1")
    assert p.parse("<think>x</think><answer> A </answer>").actions == (Answer("A"),)
    assert p.parse("<search>unclosed <answer> B </answer>").actions == (Answer("B"),)
    assert p.render_docs(HITS) == (
        "\n\n<information>Doc 1(Title: Kelvaro Industries) Founded in 1872 by Ilvar Odrenko.\n"
        "Doc 2(Title: Marrowdale) A city.</information>\n\n"
    )


def test_r1_searcher_documents_are_numbered_in_parentheses():
    p = make_protocol("r1_searcher")
    assert p.render_docs(HITS).startswith("\n\n<|begin_of_documents|>\n(1)Kelvaro Industries\nFounded")
    assert p.parse(" hmm <|begin_of_query|> Kelvaro founder <|end_of_query|>").actions == (Search("Kelvaro founder"),)
    assert p.prompt(EXAMPLE).endswith("Assistant: <think>")


def test_s3_query_json_or_plain_and_selection():
    p = make_protocol("s3")
    assert p.parse('<query>{"query": "Kelvaro founder"}</query>').actions == (Search("Kelvaro founder"),)
    assert p.parse("<query> Kelvaro founder </query>").actions == (Search("Kelvaro founder"),)
    turn = p.parse("<important_info>[2, 1]</important_info><search_complete>True</search_complete>")
    assert turn.actions == (Select((2, 1)), Complete())
    bad = p.parse("<search_complete>False</search_complete>")
    assert isinstance(bad.actions[-1], Invalid) and not bad.well_formed
    # Whole numbers only; a JSON query that is not text is empty; deep JSON is plain text.
    assert p.parse("<important_info>[12345, 1.5, 3]</important_info><search_complete>y</search_complete>").actions == (Select((12345, 3)), Complete())
    for query in ('{"query": null}', '{"query": false}', '{"query": {"q": 1}}'):
        empty = p.parse(f"<query>{query}</query>")
        assert empty.actions == (Invalid("empty query"),) and not empty.well_formed
    assert p.parse("<query>" + "[" * 3000 + "</query>").actions == (Search("[" * 3000),)
    assert p.parse("<query>" + "{" * 3000 + "</query>").actions == (Search("{" * 3000),)


def test_a_parser_that_raises_gives_an_invalid_turn():
    class Broken(type(make_protocol("search_r1"))):
        def parse_actions(self, text):
            raise RecursionError("deep")

    turn = Broken().parse("<search> x </search>")
    assert turn.actions == (Invalid("the search_r1 parser failed on this turn (RecursionError)"),) and not turn.well_formed


def test_r_search_evidence_only_counts_before_the_answer():
    p = make_protocol("r_search")
    assert p.parse("<original_evidence> E </original_evidence><answer> A </answer>").actions == (Evidence("E"), Answer("A"))
    assert p.parse("<answer> A </answer><original_evidence> E </original_evidence>").actions == (Answer("A"),)


def test_write_refuses_what_the_grammar_cannot_say():
    with pytest.raises(ConfigError, match=r"^The search_r1 protocol cannot write a turn doing search\+answer; it writes exactly one Search or Answer per turn\.$"):
        make_protocol("search_r1").write([Search("a"), Answer("b")])
