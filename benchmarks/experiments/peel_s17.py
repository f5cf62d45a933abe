"""Source variants behind benchmarks/results/peel_s17.md (python -m benchmarks.source_variants
benchmarks/experiments/peel_s17.py --name peel_s17): a causal mask's loop split in two, the
blocks wholly below the diagonal without the mask, measured before codegen does it; and an fp32
FMA matmul's stages at 128x128x32."""

from benchmarks.experiments._cases import DEFAULT

# the single masked loop over keys [0, query block end) -> [0, split) unmasked + [split, end)
LOOP = (
    r"(?s)(    for offset_4 in tl\.range\()0(, tl\.minimum\(offset_2 \+ _BLOCK_2, 4096\), "
    r"_BLOCK_4\):\n)(.*?)(        sc_1 = tl\.where\(v_5, sc, float\('-inf'\)\)\n)"
    r"(.*?        m_i_1 = m_new\n)"
)
SPLIT = "(offset_2 // _BLOCK_4) * _BLOCK_4"
PEELED = (
    rf"\g<1>0, {SPLIT}, _BLOCK_4):\n\g<3>        sc_1 = sc\n\g<5>"
    rf"\g<1>{SPLIT}\g<2>\g<3>\g<4>\g<5>"
)
TRMM_LOOP = (
    r"(?s)(    for offset_2 in tl\.range\()0(, tl\.minimum\(offset_0 \+ _BLOCK_0, 4096\), "
    r"_BLOCK_2\):\n)(.*?)(        at = tl\.where\(v_2, load, 0\.0\)\n)(.*?        acc_1 = acc_2\n)"
)
TRMM_SPLIT = "(offset_0 // _BLOCK_2) * _BLOCK_2"
TRMM_PEELED = (
    rf"\g<1>0, {TRMM_SPLIT}, _BLOCK_2):\n\g<3>        at = load\n\g<5>"
    rf"\g<1>{TRMM_SPLIT}\g<2>\g<3>\g<4>\g<5>"
)
FP32 = "default.replace(block_sizes=[128, 128, 32], num_stages={})"

EXPERIMENTS = [
    dict(
        name="causal attention 2x32x4096x128",
        kernel="benchmarks.gen_kernels.heldout_dots:attention_4d_causal",
        shape=(2, 32, 4096, 128),
        inputs="gen:attention_4d_causal",
        reference="benchmarks.gen_kernels.heldout_dots:attention_4d_causal_reference",
        variants=[DEFAULT, ("peeled", "default", [(LOOP, PEELED)]), DEFAULT],
    ),
    dict(
        name="causal attention 8x16x2048x64",
        kernel="benchmarks.gen_kernels.heldout_dots:attention_4d_causal",
        shape=(8, 16, 2048, 64),
        inputs="gen:attention_4d_causal",
        variants=[DEFAULT, ("peeled", "default", [(LOOP.replace("4096", "2048"), PEELED)])],
    ),
    dict(
        name="trmm 4096^3",
        kernel="benchmarks.gen_kernels.heldout_dots:trmm_lower",
        shape=(4096, 4096, 4096),
        inputs="gen:trmm_lower",
        variants=[DEFAULT, ("peeled", "default", [(TRMM_LOOP, TRMM_PEELED)])],
    ),
    dict(
        name="fp32 matmul 4096^3",
        kernel="benchmarks.gen_kernels.heldout_dots:matmul_any_layout",
        shape=(4096, 4096, 4096),
        inputs="gen:matmul_fp32",
        reference="benchmarks.gen_kernels.heldout_dots:matmul_reference",
        variants=[DEFAULT, *((f"{s} stages", FP32.format(s), []) for s in (3, 4, 5))],
    ),
]
