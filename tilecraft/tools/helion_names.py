"""Every public name of Helion's ``helion.language`` and ``helion`` top level, with its signature
and tilecraft's status (stage: tools; data for ``docs/helion_compat.md``).

Helion is not installed here, so its names and signatures are data, read from Helion's source
(``helion/language/__init__.py`` and ``helion/__init__.py``, August 2026). A status is ``same``
(Helion's arguments work and mean the same; ``test`` names the test that shows it), ``differs``
(``note`` says how; ``test`` when one exists) or ``missing`` (``note`` says why).
"""

from __future__ import annotations

import dataclasses

STATUSES = ("same", "differs", "missing")
PORT = "tests/test_helion_port.py"
ADV = "tests/test_advanced_index.py"


@dataclasses.dataclass(frozen=True)
class HelionName:
    module: str  # "helion.language" or "helion"
    name: str
    signature: str  # Helion's, as written in its source ("" for classes and modules)
    status: str
    note: str = ""
    test: str = ""  # "path::test_name" for same rows (and differs rows that have one)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"{self.name}: status {self.status!r} is not one of {STATUSES}")
        if self.status == "same" and not self.test:
            raise ValueError(f"{self.name}: a 'same' row must name its test")
        if self.status != "same" and not self.note:
            raise ValueError(f"{self.name}: a '{self.status}' row must say how or why")


def _hl(name: str, signature: str, status: str, note: str = "", test: str = "") -> HelionName:
    return HelionName("helion.language", name, signature, status, note, test)


def _top(name: str, signature: str, status: str, note: str = "", test: str = "") -> HelionName:
    return HelionName("helion", name, signature, status, note, test)


_IDX = "target, index: list[object], value"
_SEM = "sem: str = 'relaxed'"
_MULTI_DEVICE = "multi-device (symmetric memory) kernels are not supported"
_QUANT = "packed low-precision storage formats are not supported"

LANGUAGE: tuple[HelionName, ...] = (
    _hl("atomic_add", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_embedding_backward"),
    _hl("atomic_and", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_bitwise_atomics"),
    _hl(
        "atomic_cas",
        f"(target, index: list[object], expected, value, {_SEM})",
        "missing",
        "Triton's tl.atomic_cas takes no mask, so a tile with out-of-range lanes cannot use it",
    ),
    _hl("atomic_max", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_segment_max"),
    _hl("atomic_min", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_segment_max"),
    _hl("atomic_or", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_bitwise_atomics"),
    _hl("atomic_xchg", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_bitwise_atomics"),
    _hl("atomic_xor", f"({_IDX}, {_SEM})", "same", test=f"{PORT}::test_bitwise_atomics"),
    _hl("barrier", "()", "same", test=f"{PORT}::test_barrier_between_loops"),
    _hl("constexpr", "", "same", test=f"{PORT}::test_constexpr_and_specialize"),
    _hl("ProcessGroupName", "", "missing", _MULTI_DEVICE),
    _hl("specialize", "(value)", "same", test=f"{PORT}::test_constexpr_and_specialize"),
    _hl(
        "arange",
        "(*args: int, dtype=None, device=None, **kwargs)",
        "same",
        test=f"{PORT}::test_creation_forms",
    ),
    _hl(
        "full",
        "(shape: list[object], value: float, dtype=torch.float32, device=None)",
        "same",
        test=f"{PORT}::test_creation_forms",
    ),
    _hl(
        "zeros",
        "(shape: list[object], dtype=torch.float32, device=None)",
        "same",
        test=f"{PORT}::test_creation_forms",
    ),
    _hl(
        "breakpoint",
        "()",
        "missing",
        "no debugger stop inside generated code; run the kernel in ref mode (TILECRAFT_REF=1) "
        "and use Python's breakpoint()",
    ),
    _hl("device_print", "(prefix: str, *values)", "same", test=f"{PORT}::test_device_print"),
    _hl("AsyncCopyDescriptor", "", "missing", _MULTI_DEVICE),
    _hl(
        "make_async_remote_copy",
        "(src, src_index, device_id, dst=None, dst_index=None)",
        "missing",
        _MULTI_DEVICE,
    ),
    _hl("remote_barrier", "(device_ids)", "missing", _MULTI_DEVICE),
    _hl(
        "inline_asm_elementwise",
        "(asm: str, constraints: str, args, dtype, is_pure: bool, pack: int)",
        "missing",
        "inline assembly is target-specific; tilecraft emits portable tl code only",
    ),
    _hl(
        "inline_triton",
        "(triton_source: str, args, output_like)",
        "missing",
        "device code is traced torch ops; Triton source text is not spliced in",
    ),
    _hl(
        "triton_kernel",
        "(triton_source_or_fn, args, output_like)",
        "differs",
        "tc.triton_call(fn, *tiles, out_shape=, out_dtype=, ref=) takes a @triton.jit function "
        "(not source text) and declares the result's shape and dtype; docs/escape_hatch.md",
        "tests/test_triton_call.py::test_triton_call_numerics_and_code",
    ),
    _hl(
        "grid",
        "(begin_or_end, end_or_none=None, /, step=None)",
        "differs",
        "no step= (a step other than 1 is an error naming it); begin/end lists work",
        f"{PORT}::test_grid_and_tile_forms",
    ),
    _hl(
        "jagged_tile",
        "(parent)",
        "missing",
        "jagged loops are written as a tile loop over [begin, end) read from an offsets tensor",
    ),
    _hl(
        "static_range",
        "(begin_or_end: int, end_or_none: int | None = None, /, step: int = 1)",
        "same",
        test=f"{PORT}::test_grid_and_tile_forms",
    ),
    _hl(
        "tile",
        "(begin_or_end, end_or_none=None, /, block_size=None)",
        "same",
        test=f"{PORT}::test_grid_and_tile_forms",
    ),
    _hl(
        "dot",
        "(mat1, mat2, acc=None, out_dtype=None)",
        "same",
        test=f"{PORT}::test_matmul_out_dtype",
    ),
    _hl(
        "dot_scaled",
        "(mat1, mat1_scale, mat1_format, mat2, mat2_scale, mat2_format, acc=None, out_dtype=None)",
        "missing",
        "microscaled (MX) matmul formats are not supported",
    ),
    _hl(
        "load",
        "(tensor, index: list[object], extra_mask=None, eviction_policy=None)",
        "same",
        test=f"{PORT}::test_masked_load_store",
    ),
    _hl(
        "store",
        "(tensor, index: list[object], value, extra_mask=None)",
        "same",
        test=f"{PORT}::test_masked_load_store",
    ),
    _hl("float4_e2m1fn_x2_to_float32", "(value)", "missing", _QUANT),
    _hl(
        "load_bfloat16_x16_to_float16",
        "(storage, group_offsets, extra_mask=None)",
        "missing",
        _QUANT,
    ),
    _hl(
        "load_float4_e2m1fn_x16_to_float16",
        "(storage, group_offsets, extra_mask=None)",
        "missing",
        _QUANT,
    ),
    _hl(
        "rand",
        "(shape: list[object], seed, device=None, offsets=None)",
        "differs",
        "tc.rand(shape, seed, offset: int = 0): Philox on each element's global index; no offsets tensor",
    ),
    _hl("rand4x", "(seed, offsets, device=None)", "missing", "no hl.rand4x in tilecraft.language"),
    _hl(
        "randint",
        "(shape: list[object], low: int, high: int, seed, device=None)",
        "missing",
        "no hl.randint in tilecraft.language",
    ),
    _hl(
        "reduce",
        "(combine_fn, input_tensor, dim=None, other=0, keep_dims=False)",
        "differs",
        "tc.reduce(fn, values, dim, other=): the combine function is traced; dim is required; "
        "without other= a partial tile's padded elements are skipped",
    ),
    _hl(
        "associative_scan",
        "(combine_fn, input_tensor, dim: int, reverse: bool = False)",
        "differs",
        "tc.associative_scan(fn, values, dim, reverse=): values may be a tuple of tiles; "
        "reverse=True along a whole dim only (a tile loop's block is refused)",
    ),
    _hl(
        "cumprod",
        "(input_tensor, dim: int, reverse: bool = False)",
        "missing",
        "no hl.cumprod in tilecraft.language",
    ),
    _hl(
        "cumsum",
        "(input_tensor, dim: int, reverse: bool = False)",
        "missing",
        "no hl.cumsum in tilecraft.language",
    ),
    _hl("StackTensor", "", "missing", _MULTI_DEVICE),
    _hl("stacktensor_like", "(tensor_like, dev_ptrs)", "missing", _MULTI_DEVICE),
    _hl("tile_begin", "(tile)", "same", test=f"{PORT}::test_tile_attributes"),
    _hl("tile_block_size", "(tile)", "same", test=f"{PORT}::test_tile_attributes"),
    _hl("tile_end", "(tile)", "same", test=f"{PORT}::test_tile_attributes"),
    _hl("tile_id", "(tile)", "same", test=f"{PORT}::test_tile_attributes"),
    _hl("tile_index", "(tile)", "same", test=f"{PORT}::test_tile_attributes"),
    _hl("Tile", "", "same", test=f"{PORT}::test_tile_attributes"),
    _hl(
        "register_block_size",
        "(min_or_max: int, max_or_none: int | None = None, /)",
        "same",
        test=f"{PORT}::test_register_block_size_and_tunable",
    ),
    _hl(
        "register_tunable",
        "(name: str, fragment: ConfigSpecFragment)",
        "same",
        test=f"{PORT}::test_register_block_size_and_tunable",
    ),
    _hl(
        "join",
        "(tensor0, tensor1)",
        "differs",
        "tc.join(a, b) (tl.join: a new last dim of two); not yet checked against Helion's tests",
    ),
    _hl(
        "split",
        "(tensor)",
        "differs",
        "tc.split(x) (tl.split of a last dim of two); not yet checked against Helion's tests",
    ),
    _hl(
        "subscript",
        "(tensor, index: list[object])",
        "same",
        test=f"{PORT}::test_tile_attributes",
    ),
)

TOP_LEVEL: tuple[HelionName, ...] = (
    _top(
        "Config",
        "(*, block_sizes=None, num_threads=None, loop_orders=None, flatten_loops=None, "
        "l2_groupings=None, reduction_loops=None, range_unroll_factors=None, "
        "range_warp_specializes=None, range_num_stages=None, range_multi_buffers=None, "
        "range_flattens=None, static_ranges=None, pallas_load_buffer_count=None, "
        "load_eviction_policies=None, load_cache_modifiers=None, store_cache_modifiers=None, "
        "num_warps=None, num_stages=None, pid_type=None, num_sm_multiplier=None, maxnreg=None, "
        "indexing=None, atomic_indexing=None, advanced_controls_file=None, "
        "epilogue_subtile=None, xcd_remap=None, **kwargs)",
        "differs",
        "the fields tilecraft implements keep Helion's names and meaning; the others "
        "(tilecraft.config.compat_names.HELION_ONLY_CONFIG_FIELDS) have no effect here",
        f"{PORT}::test_helion_config_fields",
    ),
    _top("Kernel", "", "same", test=f"{PORT}::test_embedding_backward"),
    _top(
        "OutputCodeOptions",
        "",
        "missing",
        "generated code always imports tilecraft's small launcher helpers",
    ),
    _top(
        "RefMode",
        "",
        "differs",
        "ref mode is TILECRAFT_REF=1 or kernel.run_ref(*args), not a setting enum",
        f"{ADV}::test_ref_mode_matches_eager",
    ),
    _top(
        "Settings",
        "",
        "differs",
        "settings are @kernel keyword arguments and TILECRAFT_* environment variables",
    ),
    _top(
        "aot_kernel",
        "(fn=None, *, config=None, configs=None, batched=None, collect_fn=None, "
        "measure_fn=None, **settings)",
        "missing",
        "ahead-of-time tuning over collected shapes is not implemented",
    ),
    _top("cdiv", "(a: int, b: int) -> int", "same", test=f"{PORT}::test_host_helpers"),
    _top(
        "exc",
        "",
        "differs",
        "errors are tilecraft.errors (TilecraftError and its subclasses), with file:line, also "
        "under tilecraft.exc; its other names there are warning categories tilecraft never "
        "issues (for ignore_warnings=)",
    ),
    _top(
        "from_cache",
        "(*, max_configs=None, configs=())",
        "missing",
        "autotuner_fn is not a setting; tuned configs are cached on disk automatically",
    ),
    _top(
        "jit",
        "(fn=None, *, config=None, configs=None, key=None, **settings)",
        "same",
        test=f"{PORT}::test_host_helpers",
    ),  # fmt: skip
    _top(
        "kernel",
        "(fn=None, *, config=None, configs=None, key=None, **settings)",
        "same",
        test=f"{PORT}::test_embedding_backward",
    ),  # fmt: skip
    _top("language", "", "same", test=f"{PORT}::test_embedding_backward"),
    _top("next_power_of_2", "(n: int) -> int", "same", test=f"{PORT}::test_host_helpers"),
    _top(
        "runtime",
        "",
        "differs",
        "tilecraft.runtime holds the kernel and launcher; Helion's runtime helpers are not there",
    ),
)

ALL: tuple[HelionName, ...] = LANGUAGE + TOP_LEVEL
