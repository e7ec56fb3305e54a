"""RowLinear: the same products as nn.Linear, through W @ x.T for few rows without grad."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch import nn  # noqa: E402

from searchgym.lm.linear import RowLinear, use_row_linear  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm  # noqa: E402


def _calls(monkeypatch):
    """Count the calls of nn.functional.linear made inside RowLinear.forward."""
    calls = []
    real = nn.functional.linear

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(nn.functional, "linear", counting)
    return calls


@pytest.mark.parametrize("bias", [False, True])
def test_few_rows_without_grad_take_the_weight_first_product(monkeypatch, bias):
    torch.manual_seed(0)
    plain = nn.Linear(24, 40, bias=bias)
    row = nn.Linear(24, 40, bias=bias)
    row.load_state_dict(plain.state_dict())
    use_row_linear(row)
    assert type(row) is RowLinear and isinstance(row, nn.Linear)
    calls = _calls(monkeypatch)
    for shape in [(1, 24), (5, 24), (3, 1, 24), (2, 7, 24)]:
        x = torch.randn(*shape)
        with torch.inference_mode():
            out = row(x)
        assert out.shape == (*shape[:-1], 40)
        assert torch.allclose(out, x @ plain.weight.T + (plain.bias if bias else 0), atol=1e-5)
    assert calls == []  # none of those went through linear
    many = torch.randn(RowLinear.max_rows + 1, 24)
    with torch.inference_mode():
        row(many)
    assert calls == [many.shape]  # past max_rows: linear, as nn.Linear
    x = torch.randn(3, 24, requires_grad=True)
    row(x).sum().backward()  # with grad (training): linear, and gradients flow as usual
    assert calls[-1] == x.shape and x.grad is not None and row.weight.grad is not None


def test_switching_a_model_keeps_weights_ties_and_generations():
    model = tiny_causal_lm(seed=3)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.inference_mode():
        before = model(ids).logits
    state = {k: v.clone() for k, v in model.state_dict().items()}
    linears = sum(type(m) is nn.Linear for m in model.modules())
    assert use_row_linear(model) == linears > 0
    assert all(type(m) is not nn.Linear for m in model.modules())
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    if model.config.tie_word_embeddings:
        assert model.lm_head.weight is model.get_input_embeddings().weight
    with torch.inference_mode():
        assert torch.allclose(model(ids).logits, before, atol=1e-5)


def test_weights_off_a_64_byte_boundary_are_realigned():
    layer = nn.Linear(16, 8)
    storage = torch.randn(8 * 16 + 3)
    layer.weight = nn.Parameter(storage[3:].view(8, 16))  # 12 bytes past an aligned start
    assert layer.weight.data_ptr() % 64
    x = torch.randn(2, 16)
    expected = x @ layer.weight.detach().T + layer.bias.detach()
    use_row_linear(layer)
    assert layer.weight.data_ptr() % 64 == 0
    with torch.inference_mode():
        assert torch.allclose(layer(x), expected, atol=1e-6)
