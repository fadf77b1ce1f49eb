"""One notation (issue 42, item 4): the letters of the intro's table mean the same
thing in every chapter. The old clashes, each caught here:

- ``H`` is the number of attention heads; chapter 1 once used it for the GRU's hidden
  size, which is ``D`` (the width of every token's vector) there too.
- Attention scores are ``z`` and weights ``a`` (chapter 1's ``a_i(j)``); chapter 4
  wrote the weights ``w_j`` and the scores ``s_j``, chapter 6 ``α_ij`` and ``s_ij``,
  while ``s_j`` is chapter 1's encoder state.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from sync_colab import toc_files  # book/ is on pythonpath

ROOT = Path(__file__).resolve().parents[2]
MATHS = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
# in the prose's maths: weights or scores under another letter
OLD_LETTERS = {
    "attention weights written α": re.compile(r"\\alpha_"),
    "attention weights written w_j": re.compile(r"(?<![A-Za-z\\])w_(?:j|\{)"),
    "attention scores written s (s_j is an encoder state)": re.compile(
        r"e\^\{[^}]*(?<![A-Za-z\\])s_|(?<![A-Za-z\\])s_\{ij\}|(?<![A-Za-z\\])s = QK"
    ),
}
HIDDEN_H = re.compile(r"(?<![A-Za-z_\\])H(?![A-Za-z_])")


def clashes(markdown: str) -> list[str]:
    """The old letters in the maths of ``markdown``."""
    maths = " ".join(MATHS.findall(markdown))
    return [why for why, pattern in OLD_LETTERS.items() if pattern.search(maths)]


def _cells(page: str):
    return nbformat.read(ROOT / f"{page}.ipynb", as_version=4).cells


def test_no_chapter_writes_scores_or_weights_in_another_letter():
    found = {
        (page, cell.id, why)
        for page in toc_files(ROOT)
        if page.startswith("chapters/")
        for cell in _cells(page)
        if cell.cell_type == "markdown"
        for why in clashes(cell.source)
    }
    assert not found, found


def test_chapter_1_has_no_h_it_is_the_number_of_heads():
    cells = _cells("chapters/01_seq2seq_to_attention")
    found = [c.id for c in cells if HIDDEN_H.search(c.source)]
    assert not found, f"chapter 1 uses H (the intro's number of heads) in {found}"


def test_the_check_can_fail():
    """The sentences the book had catch, the ones it has now pass."""
    assert clashes(r"$$ w_j = \frac{e^{\beta s_j}}{\sum_{j'} e^{\beta s_{j'}}} $$") == [
        "attention weights written w_j",
        "attention scores written s (s_j is an encoder state)",
    ]
    assert len(clashes(r"$$ \alpha_{ij} = \frac{m_{ij} e^{s_{ij}}}{Z} $$")) == 2
    assert clashes(r"with scores $s = QK^\top / \sqrt{d_k}$") != []
    assert (
        clashes(r"$$ a_j = \frac{e^{\beta z_j}}{\sum_{j'} e^{\beta z_{j'}}} $$") == []
    )
    # chapter 1's states and its dot score stay as they are
    assert (
        clashes(r"its dot score $h_i \cdot s_j$ and $c_i = \sum_j a_i(j)\, s_j$") == []
    )
    assert HIDDEN_H.search("E, H = 64, 128") and not HIDDEN_H.search("(B, D), hidden")
