"""A damaged cache, lock, log or config table never fails a call (README: "a broken cache never
fails a call"), and the tools that repair a cache survive what they repair. Found by fuzzing the
autotuner's files (session 35)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from kernels import plus_one

import tilecraft as tc
from tilecraft.autotune import cache
from tilecraft.autotune.lock import lock_path
from tilecraft.errors import ConfigError
from tilecraft.runtime import module


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILECRAFT_NO_AUTOTUNE", raising=False)
    monkeypatch.setattr(module, "_loaded", {})
    plus_one.reset()
    return tmp_path


def test_a_damaged_generated_file_is_written_again(fresh_cache: Path) -> None:
    x = torch.randn(37)
    config = tc.Config(block_sizes=[16])
    bound = plus_one.bind((x,))
    bound.compile_config(config)
    (path,) = (fresh_cache / "code").glob("tc_*.py")
    path.write_text(path.read_text()[:100])  # a crash or a full disk while it was copied
    module._loaded.clear()
    plus_one.reset()
    bound = plus_one.bind((x,))
    assert torch.equal(bound.run(bound.compile_config(config), x), x + 1)
    assert "def launch_0" in path.read_text()


def test_a_lock_file_that_cannot_be_opened_tunes_unguarded(fresh_cache: Path) -> None:
    """A folder in the lock file's place (as another user's read-only lock file) raised."""
    x = torch.randn(37)
    path = lock_path(plus_one.bind((x,)))
    assert path is not None
    path.mkdir()
    assert torch.equal(plus_one(x), x + 1)


def test_an_autotune_log_that_cannot_be_appended_to_warns_once(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = fresh_cache / "log-is-a-folder"
    log.mkdir()
    monkeypatch.setenv("TILECRAFT_AUTOTUNE_LOG", str(log))
    x = torch.randn(37)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(plus_one(x), x + 1)
    notes = [str(w.message) for w in caught if "TILECRAFT_AUTOTUNE_LOG" in str(w.message)]
    assert len(notes) == 1 and "not logging" in notes[0]


def test_cache_ls_and_clear_survive_malformed_entries(fresh_cache: Path) -> None:
    x = torch.randn(37)
    plus_one(x)
    (entry,) = (fresh_cache / "autotune").glob("*.json")
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "created": "yesterday", "key": "not a dict"}))
    (fresh_cache / "autotune" / "plus_one-0000.default.json").mkdir()  # a folder as an entry
    assert len(cache.ls()) == 2
    assert cache.clear() == 2
    assert not list((fresh_cache / "autotune").glob("*.json"))


@pytest.mark.parametrize(
    "entries",
    [["oops"], [{"name": "plus_one", "args": [1], "config": {}}]],
    ids=["not a dict", "args not records"],
)
def test_a_malformed_config_table_entry_is_skipped(fresh_cache: Path, entries: list) -> None:
    table = fresh_cache / "table.json"
    table.write_text(
        json.dumps({"format": "tilecraft.config_table", "version": 1, "entries": entries})
    )
    kernel = tc.kernel(config_table=str(table))(plus_one.fn)
    x = torch.randn(37)
    assert torch.equal(kernel(x), x + 1)


def test_a_relative_config_table_is_read_beside_the_kernels_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config_table="kernels.tilecraft.json", as docs/deploy.md writes it, was read from the
    working directory: a server started elsewhere failed every call (fuzz round 55c)."""
    from tilecraft.autotune.table import table_path

    kernel = tc.kernel(config_table="beside.tilecraft.json")(plus_one.fn)
    monkeypatch.chdir(tmp_path)
    assert table_path(kernel) == Path(plus_one.source.filename).parent / "beside.tilecraft.json"
    absolute = tc.kernel(config_table=str(tmp_path / "t.json"))(plus_one.fn)
    assert table_path(absolute) == tmp_path / "t.json"


def test_a_damaged_table_beside_the_module_costs_its_configs_not_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge conflict in <module>.tilecraft.json failed every call of every kernel in the
    module; an explicit config_table= that cannot be read still says so (fuzz round 55c)."""
    from tilecraft.autotune import table

    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "kern.py").write_text(
        "import torch\nimport tilecraft as tc\n\n\n@tc.kernel\ndef inc(x: torch.Tensor) -> "
        "torch.Tensor:\n    out = torch.empty_like(x)\n    for t in tc.tile(x.size(0)):\n"
        "        out[t] = x[t] + 1\n    return out\n"
    )
    (folder / "kern.tilecraft.json").write_text('{"version": 1, "entries": [<<<<<<< HEAD')
    monkeypatch.syspath_prepend(str(folder))
    import kern

    x = torch.randn(16)
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        assert table.lookup(kern.inc.bind((x,))) is None
    torch.testing.assert_close(kern.inc(x), x + 1)
    explicit = tc.kernel(config_table=str(folder / "kern.tilecraft.json"))(kern.inc.fn)
    with pytest.raises(ConfigError, match="config_table"):
        table.lookup(explicit.bind((x,)))


def test_settings_expand_a_home_cache_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilecraft import settings

    monkeypatch.setenv("TILECRAFT_CACHE_DIR", "~/tc-cache")
    assert settings.cache_dir() == Path.home() / "tc-cache"
