"""Max abs difference between transformer_edu and PyTorch's own modules.

    .venv/bin/python scripts/measure_equality.py

Weights are copied with ``from_torch``; inputs carry padding (and, for the decoder,
causal) masks; 10 random seeds; float32. The tests assert <= 1e-5.
"""

import torch

from transformer_edu import Decoder, Encoder, MultiHeadAttention
from transformer_edu.model.masks import (
    combine_masks,
    from_torch_mask,
    key_padding_from_torch,
)


def main(seeds: int = 10) -> None:
    torch.set_num_threads(1)
    worst: dict[str, float] = {}

    def note(name: str, diff: torch.Tensor) -> None:
        worst[name] = max(worst.get(name, 0.0), diff.abs().max().item())

    B, S, T, D, H = 4, 9, 7, 64, 8
    for seed in range(seeds):
        torch.manual_seed(seed)
        kpm = torch.arange(S)[None] >= torch.randint(1, S + 1, (B,))[:, None]
        tkpm = torch.arange(T)[None] >= torch.randint(1, T + 1, (B,))[:, None]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = blocked
        x, mem, src = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
        m = torch.nn.MultiheadAttention(D, H, batch_first=True).eval()
        ref, _ = m(x, mem, mem, key_padding_mask=kpm)
        ours = MultiHeadAttention.from_torch(m).eval()
        note("MultiHeadAttention", ours(x, mem, mem, key_padding_from_torch(kpm)) - ref)
        for nf in (False, True):
            el = torch.nn.TransformerEncoderLayer(
                D, H, 128, batch_first=True, norm_first=nf
            )
            e = torch.nn.TransformerEncoder(
                el, 3, torch.nn.LayerNorm(D), enable_nested_tensor=False
            ).eval()
            enc = Encoder.from_torch(e).eval()
            got = enc(src, key_padding_from_torch(kpm))
            note(f"Encoder norm_first={nf}", got - e(src, src_key_padding_mask=kpm))
            with torch.no_grad():  # PyTorch's fused inference fast path
                fast = e(src, src_key_padding_mask=kpm)
                got = enc(src, key_padding_from_torch(kpm))
            note(f"Encoder norm_first={nf} (torch fast path, real tokens)",
                 (got - fast)[~kpm])  # fmt: skip
            dl = torch.nn.TransformerDecoderLayer(
                D, H, 128, batch_first=True, norm_first=nf
            )
            d = torch.nn.TransformerDecoder(dl, 3, torch.nn.LayerNorm(D)).eval()
            ref = d(x, mem, tgt_mask=causal, tgt_key_padding_mask=tkpm,
                    memory_key_padding_mask=kpm)  # fmt: skip
            tgt_mask = combine_masks(
                from_torch_mask(causal), key_padding_from_torch(tkpm)
            )
            got = Decoder.from_torch(d).eval()(
                x, mem, tgt_mask, key_padding_from_torch(kpm)
            )
            note(f"Decoder norm_first={nf}", got - ref)
    for name, value in worst.items():
        print(f"{name}: max abs difference {value:.2e} over {seeds} seeds")


if __name__ == "__main__":
    main()
