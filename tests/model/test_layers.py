import pytest
import torch

from transformer_edu import DecoderLayer, EncoderLayer
from transformer_edu.model.layers import copy_torch_layer_
from transformer_edu.model.masks import causal_mask


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch_layer(norm_first):
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    copy_torch_layer_(ours, theirs)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch_layer(norm_first):
    torch.manual_seed(0)
    theirs = torch.nn.TransformerDecoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = DecoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    copy_torch_layer_(ours, theirs)
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    expected = theirs(
        x, mem, tgt_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    )
    torch.testing.assert_close(
        ours(x, mem, causal_mask(5)), expected, atol=1e-5, rtol=1e-5
    )


def test_post_ln_output_is_normalised_and_pre_ln_is_not():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16) * 4 + 3
    post = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=False).eval()(x)
    pre = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=True).eval()(x)
    torch.testing.assert_close(post.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    assert pre.mean(-1).abs().max() > 0.5  # the residual stream keeps x's offset


def test_gelu_layers_are_rejected():
    theirs = torch.nn.TransformerEncoderLayer(
        8, 2, 16, activation="gelu", batch_first=True
    )
    with pytest.raises(ValueError, match="ReLU only"):
        copy_torch_layer_(EncoderLayer(8, 2, 16), theirs)
