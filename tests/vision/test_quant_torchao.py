"""The CPU's W8A8 path (``torch-dynamic-int8``) on torchao's quantization, not the deprecated
``torch.ao.quantization`` (issue 23): no deprecation warning, int8 weights per channel exactly as
torchao's primitives make them, activations per token by the same recipe, and the product within
int8 rounding of the float Linear."""

from __future__ import annotations

import warnings

import pytest

from pytest_perfgate.vision import quant

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")


def test_no_deprecated_quantization_api_is_touched() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.ao's DeprecationWarning, the quantized tensors' UserWarning
        q = quant.quantize(model, "torch-dynamic-int8", "cpu")
        q.model(torch.randn(3, 32))
    assert all(type(m).__name__ != "DynamicQuantizedLinear" for m in q.model.modules())
    # int8 weights and float32 scales per output channel, the biases: 32*16 + 16*8 + 4*(16 + 8) * 2
    assert q.param_bytes == 32 * 16 + 16 * 8 + 4 * (16 + 8) * 2


def test_weights_are_torchaos_and_activations_follow_the_same_recipe() -> None:
    from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine, quantize_affine

    gen = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(48, 24)
    q = quant.DynamicInt8Linear(lin)
    w = lin.weight.detach()
    scale, zero = choose_qparams_affine(w, MappingType.SYMMETRIC, (1, 48), torch.int8, quant_min=-127, quant_max=127,
                                        scale_dtype=torch.float32)
    assert torch.equal(q.qweight, quantize_affine(w, (1, 48), scale, zero, torch.int8, -127, 127))
    assert torch.equal(q.wscale.flatten(), scale.flatten())
    x = torch.randn(40, 48, generator=gen) * torch.linspace(0.1, 10, 40).reshape(-1, 1)  # tokens of every size
    xs, xz = choose_qparams_affine(x, MappingType.SYMMETRIC, (1, 48), torch.int8, quant_min=-127, quant_max=127,
                                   scale_dtype=torch.float32)
    xq = quantize_affine(x, (1, 48), xs, xz, torch.int8, -127, 127)
    exact = (xq.int() @ q.qweight.int().t()).float() * xs.reshape(-1, 1) * scale.reshape(1, -1) + lin.bias.detach()
    with torch.no_grad():
        got, ref = q(x), lin(x)
    assert torch.allclose(got, exact, rtol=1e-5, atol=1e-5)  # the same int8 operands, to float rounding
    assert float((got - ref).abs().max()) < 0.03 * float(ref.abs().max())  # within int8 rounding of the float
    assert got.shape == ref.shape and got.dtype == x.dtype
