"""Helion's config field and kernel option names that tilecraft does not implement (stage: config).

A Helion kernel ports by changing its imports, so its ``helion.Config(...)`` fields and
``@helion.kernel(...)`` options must not crash or be silently dropped: a name listed here is
accepted and reported with one warning naming it (and why it has no effect), while a name that is
neither ours nor Helion's is a typo (an error with a did-you-mean, below: Config keys that are
clearly misspelled fields fail in ``Config`` itself, others where the kernel's tunables are known). Where tilecraft has the same
meaning under another name, the reason names it.

The lists follow Helion's ``helion.Config.__init__`` keywords and ``helion.runtime.settings``
fields (read from Helion's source, August 2026); ``docs/helion_compat.md`` is generated from them.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable
from typing import Any

from tilecraft.errors import ConfigError, SourceLoc, user_stacklevel

# helion.Config keywords without a tilecraft meaning -> why they do nothing here
HELION_ONLY_CONFIG_FIELDS: dict[str, str] = {
    "num_threads": "threads per block of Helion's non-Triton backends; Triton uses num_warps",
    "static_ranges": "unrolled device loops are written as tc.static_range, not a config choice",
    "pallas_load_buffer_count": "Pallas (TPU) backend option",
    "load_cache_modifiers": "per-load cache modifiers are not searched yet",
    "store_cache_modifiers": "per-store cache modifiers are not searched yet",
    "atomic_indexing": "atomics always use pointer indexing",
    "advanced_controls_file": "PTXAS advanced-controls files are not passed to the compiler",
    "epilogue_subtile": "epilogue subtiling is not implemented",
    "xcd_remap": "AMD XCD program remapping is not implemented",
}

# @helion.kernel(...) settings without a tilecraft meaning -> why they do nothing here
HELION_ONLY_KERNEL_OPTIONS: dict[str, str] = {
    "backend": "tilecraft generates Triton only",
    "ignore_warnings": "tilecraft's warnings are Python warnings; filter them with warnings",
    "index_dtype": "index width is chosen from the actual extents",
    "fast_math": "no fast-math lowering",
    "persistent_reserved_sms": "persistent grids use every SM",
    "autotune_force_persistent": "pid_type is searched, not forced",
    "distributed": "no multi-device kernels",
    "autotune_log_level": "progress goes to a terminal bar and one line per generation",
    "autotune_log": "use TILECRAFT_AUTOTUNE_LOG=path",
    "autotune_log_details": "use TILECRAFT_AUTOTUNE_LOG=path",
    "autotune_compile_timeout": "compile workers have their own deadline",
    "autotune_benchmark_subprocess": "benchmarks always run in an isolated worker process",
    "autotune_benchmark_timeout": "benchmark workers have their own deadline",
    "autotune_precompile": "compiles always run in worker processes",
    "autotune_precompile_jobs": "worker count follows the CPU cores and device memory",
    "autotune_random_seed": "the search's seed is derived from the kernel",
    "autotune_best_of_k": "finalists are re-timed within the budget",
    "autotune_accuracy_check": "every candidate is checked against the baseline",
    "autotune_rebenchmark_threshold": "finalists are re-timed within the budget",
    "autotune_suspicious_rebenchmark_ratio": "finalists are re-timed within the budget",
    "autotune_search_acf": "no ACF search",
    "autotune_progress_bar": "the bar shows on a terminal only",
    "autotune_max_generations": "the search is bounded by autotune_budget_s",
    "autotune_ignore_errors": "failing candidates are always skipped, never fatal",
    "autotune_adaptive_timeout": "worker deadlines are fixed",
    "print_output_code": "use TILECRAFT_DEBUG=1 or kernel.bind(args).to_triton_code(config)",
    "print_repro": "a repro script is written when every candidate fails",
    "output_origin_lines": "generated code always carries # src[file:line] comments",
    "force_autotune": "use TILECRAFT_FORCE_AUTOTUNE=1",
    "autotune_config_overrides": "pass config= or configs=",
    "autotune_seed_configs": "pass configs=",
    "disable_autotuner_heuristics": "the heuristic default is always the first candidate",
    "allow_warp_specialize": "range_warp_specializes is searched where the target allows",
    "debug_dtype_asserts": "no dtype asserts in generated code",
    "ref_mode": "use TILECRAFT_REF=1 or kernel.run_ref(...)",
    "autotune_cache": "tuned configs are cached on disk per kernel, shapes, target and versions",
    "autotuner_fn": "the search strategy is fixed",
    "autotune_baseline_accuracy_check_fn": "accuracy uses dtype-aware tolerances",
    "autotune_benchmark_fn": "benchmarks use tilecraft's isolated worker",
    "autotune_best_available_max_configs": "no best-available cache scan",
    "autotune_best_available_max_cache_scan": "no best-available cache scan",
    "autotune_initial_population_strategy": "the search starts from the discovered default",
    "torch_compile_fusion": "no torch.compile fusion",
    "autotune_with_torch_compile_fusion": "no torch.compile fusion",
    "autotune_config_filter": "use configs= to restrict the candidates",
    "pallas_collective_id": "Pallas (TPU) backend option",
    "pallas_interpret": "Pallas (TPU) backend option",
    "pallas_topk_recall_target": "Pallas (TPU) backend option",
    "triton_do_not_specialize": "specialization follows static_shapes and tc.specialize",
    "autotune_log_search_space": "use TILECRAFT_AUTOTUNE_LOG=path",
    "autotune_log_search_space_verbose": "use TILECRAFT_AUTOTUNE_LOG=path",
    "autotune_log_search_space_path": "use TILECRAFT_AUTOTUNE_LOG=path",
    "key": "specialization keys follow the arguments' shapes and dtypes",
    # same meaning under another name or shape in tilecraft: the warning says which
    "autotune_budget_seconds": "write autotune_budget_s=",
    "autotune_baseline_fn": "write baseline=",
    "autotune_baseline_atol": "write autotune_tolerances={dtype: (rtol, atol)}",
    "autotune_baseline_rtol": "write autotune_tolerances={dtype: (rtol, atol)}",
}


_warned: set[tuple[str, str]] = set()


def closest(name: str, valid: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.6)
    return found[0] if found else None


def warn_helion_only(kind: str, name: str) -> None:
    """One warning per (kind, name) and process: the name is accepted and has no effect."""
    if (kind, name) in _warned:
        return
    _warned.add((kind, name))
    table = HELION_ONLY_KERNEL_OPTIONS if "option" in kind else HELION_ONLY_CONFIG_FIELDS
    why = table.get(name, "")
    warnings.warn(
        f"tilecraft: {kind} '{name}' is a Helion name that tilecraft does not implement; "
        f"ignored" + (f" ({why})" if why else ""),
        stacklevel=user_stacklevel(),
    )


def unknown_name_error(
    kind: str, name: str, valid: Iterable[str], loc: SourceLoc | None = None
) -> ConfigError:
    valid = sorted(valid)
    guess = closest(name, valid)
    hint = f"did you mean '{guess}'?" if guess else f"valid names: {', '.join(valid)}"
    return ConfigError(f"unknown {kind} '{name}'", loc, hint=hint)


def check_kernel_options(
    options: dict[str, Any], valid: Iterable[str], loc: SourceLoc | None
) -> dict[str, Any]:
    """``@tc.kernel(**options)`` beyond the named parameters: Helion-only names warn and are
    dropped; anything else is an error naming the closest valid option."""
    valid = set(valid)
    kept = {}
    for name, value in options.items():
        if name in valid:
            kept[name] = value
        elif name in HELION_ONLY_KERNEL_OPTIONS:
            warn_helion_only("@tc.kernel option", name)
        else:
            raise unknown_name_error("@tc.kernel option", name, valid, loc)
    return kept


def is_misspelled_field(name: str, fields: Iterable[str]) -> str | None:
    """A Config key that is clearly a known field misspelled (``num_warp``): the field, else None
    (other unknown keys may be user tunables, checked where the kernel's tunables are known)."""
    found = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.85)
    return found[0] if found else None
