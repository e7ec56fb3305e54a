import pytest

from searchgym.rewards import normalize_answer, normalize_answer_r1searcher, tokens


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower.", "eiffel tower"),
        ("U.S.A.", "usa"),
        ("Jean-Paul Sartre", "jeanpaul sartre"),
        ("x_y", "xy"),
        ("  a\tbig\n  dog ", "big dog"),
        # Articles go only as whole words.
        ("Theater an Anna", "theater anna"),
        # Typographic quotes are not ASCII punctuation: the standard normalizer keeps them.
        ("‘Hello’", "‘hello’"),
        ("True", "true"),
        ("", ""),
    ],
)
def test_normalize_answer_deletes_punctuation(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower.", "eiffel tower"),
        # The spaced-out "a" is then dropped as an article, as in R1-Searcher.
        ("U.S.A.", "u s"),
        ("Jean-Paul Sartre", "jean paul sartre"),
        ("x_y", "x y"),
        ("‘Hello’", "hello"),
        ("it´s", "it s"),
        # R1-Searcher's bool_mapping: only the exact strings.
        ("True", "yes"),
        ("False", "no"),
        ("true", "true"),
        ("A True story", "true story"),
    ],
)
def test_normalize_answer_r1searcher_replaces_punctuation_with_spaces(text, expected):
    assert normalize_answer_r1searcher(text) == expected


def test_tokens_uses_the_given_normalizer():
    assert tokens("The big, big dog") == ["big", "big", "dog"]
    assert tokens("Jean-Paul") == ["jeanpaul"]
    assert tokens("Jean-Paul", normalize_answer_r1searcher) == ["jean", "paul"]
