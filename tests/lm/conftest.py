"""Fixtures shared by the language-model backend tests."""

import pytest


@pytest.fixture(scope="module")
def reference():
    """The tiny random model on transformers: what the vLLM engines are compared with."""
    from searchgym.lm.hf import TransformersLM
    from searchgym.lm.testing import tiny_model_folder

    return TransformersLM(str(tiny_model_folder()))
