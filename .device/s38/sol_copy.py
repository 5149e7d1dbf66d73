"""What the thirty-eighth session's copies of sdpa_hopper share (sol2.py, sol4.py, sol5.py,
sol6.py): a whole copy per name through the device scripts' TemplateCopy, and the template's lines
they replace."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from template_copy import TemplateCopy  # noqa: E402

# The overlapped loop's online softmax of a tile, and O's rescale.
SOFTMAX = "evo::wgmma_attention_softmax<BLOCK_N, FAST_EXP>(s, row_max, row_sum, kSoftmaxScale, alpha);"
RESCALE = "evo::wgmma_attention_rescale<HEAD_DIM>(acc, alpha);"


def copy(out, name, wrong=False):
    """OUT/name/sdpa_hopper, every knob searchable; wrong: a speed-of-light copy, its tolerance
    opened so that the gates time it."""
    template = TemplateCopy(os.path.join(out, name), [])
    if wrong:
        template.open_tolerance()
    return template
