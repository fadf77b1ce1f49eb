import math

import pytest
import torch

from transformer_edu import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)


def test_token_embedding_scales_by_sqrt_d_model_and_zeroes_pads():
    torch.manual_seed(0)
    emb = TokenEmbedding(10, 16, pad_idx=0)
    with torch.no_grad():
        emb.weight[0].fill_(
            1.0
        )  # even if the PAD row is written to (tying), pads stay 0
    tokens = torch.tensor([[3, 4, 0]])
    x = emb(tokens)
    assert x.shape == (1, 3, 16)
    torch.testing.assert_close(x[0, 0], emb.weight[3] * math.sqrt(16))
    assert torch.count_nonzero(x[0, 2]) == 0


def test_embedding_lookup_is_one_hot_times_matrix():
    emb = TokenEmbedding(7, 4, pad_idx=None)
    tokens = torch.tensor([[1, 5, 2]])
    one_hot = torch.nn.functional.one_hot(tokens, 7).float()
    torch.testing.assert_close(emb(tokens), one_hot @ emb.weight * 2.0)


@pytest.mark.parametrize(
    "tokens, message",
    [
        (torch.tensor([[1, 10]]), r"token id 10 .*vocab_size=10"),
        (torch.tensor([[-1, 2]]), "token id -1"),
        (torch.zeros(0, 3, dtype=torch.long), "empty batch"),
        (torch.zeros(2, 0, dtype=torch.long), "length 0"),
        (torch.tensor([[1.0, 2.0]]), "integer token ids"),
    ],
)
def test_bad_token_ids_raise_value_error(tokens, message):
    with pytest.raises(ValueError, match=message):
        TokenEmbedding(10, 4)(tokens)


def test_sinusoidal_table_matches_the_formula():
    pe = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_table_odd_width():
    pe = sinusoidal_table(5, 7)
    assert pe.shape == (5, 7)
    assert pe[1, 6].item() == pytest.approx(math.sin(1 / 10000 ** (6 / 7)), abs=1e-6)


@pytest.mark.parametrize(
    "cls", [SinusoidalPositionalEncoding, LearnedPositionalEncoding]
)
def test_positional_encoding_adds_per_position_and_honours_offset(cls):
    pe = cls(8, max_len=20).eval()
    x = torch.zeros(2, 5, 8)
    full = pe(torch.zeros(2, 9, 8))
    torch.testing.assert_close(pe(x, offset=4), full[:, 4:9])
    assert not torch.allclose(full[0, 0], full[0, 1])


@pytest.mark.parametrize(
    "cls", [SinusoidalPositionalEncoding, LearnedPositionalEncoding]
)
def test_too_long_sequence_names_both_lengths(cls):
    pe = cls(8, max_len=6)
    with pytest.raises(ValueError, match=r"sequence length 7 exceeds .*max_len=6"):
        pe(torch.zeros(1, 7, 8))
