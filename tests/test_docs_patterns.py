"""docs/patterns.md: every ``python`` block there is a complete program that asserts its
kernel against eager PyTorch; each runs here (in the interpreter) from a file of its own, so the
kernels have source lines as a user's would, and the code five of them compile to is the one
their sections promise (one paired access, one scale row per K step, a register gather, one
load of a row of four, a body per side of a diagonal)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "patterns.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
# block -> (kernel, its arguments' names in the block, what its compiled code must hold)
PROMISED = {
    0: ("complex_scale", ("x", "w"), "tl.split(tl.reshape(span"),
    1: ("dequant_matmul", ("x", "q", "scales"), "tl.broadcast_to(tl.load(scales"),
    5: ("ctc_nll", ("log_probs", "targets", "in_lens", "tgt_lens"), "tl.gather(alpha"),
    6: ("discounted_returns", ("rewards", "done", "gamma"), "tl.associative_scan("),
    7: ("box_areas_clipped", ("boxes", "width", "height"), "4 * offset_0 + tl.arange(0, "),
    8: ("causal_fill_", ("scores",), "elif offset_1 + _BLOCK_1 <= offset_2:"),
}


def test_the_page_has_its_patterns() -> None:
    titles = re.findall(r"^## (.+)$", DOC.read_text(), re.M)
    assert len(titles) == len(BLOCKS) >= 5, (titles, len(BLOCKS))


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_pattern_runs_and_matches_eager(index: int, tmp_path: Path) -> None:
    path = tmp_path / f"pattern_{index}.py"
    path.write_text(BLOCKS[index])
    names = runpy.run_path(str(path), run_name="__main__")
    if index in PROMISED:
        kernel, args, text = PROMISED[index]
        bound = names[kernel].bind(tuple(names[a] for a in args))
        code = bound.to_triton_code(bound.config_spec.default())
        assert text in code, code
