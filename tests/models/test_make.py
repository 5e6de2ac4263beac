"""The tiny model generator: files, cache keying and reuse, determinism, tokenizer."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.models import ModelSet, default_cache_dir, make_models, params_hash
from pytest_perfgate.models.make import PARAMS


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ModelSet:
    return make_models(tmp_path_factory.mktemp("cache"))


def test_files_present(models: ModelSet) -> None:
    assert models.root.name == models.params_hash == params_hash()
    for d in (models.target, models.draft, models.draft_independent):
        assert (d / "model.safetensors").is_file() and (d / "config.json").is_file()
        assert (d / "tokenizer.json").is_file()
        cfg = json.loads((d / "config.json").read_text())
        assert cfg["vocab_size"] == 512 and cfg["hidden_size"] == 256 and cfg["num_hidden_layers"] == 4
        assert cfg["max_position_embeddings"] >= 16384
        assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (models.tokenizer / "tokenizer.json").is_file()
    info = models.info()
    assert info["params_hash"] == models.params_hash and info["params"]["draft_noise"] == PARAMS["draft_noise"]
    assert not [p for p in models.root.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_weights_differ_between_target_and_drafts(models: ModelSet) -> None:
    t = sha(models.target / "model.safetensors")
    assert t != sha(models.draft / "model.safetensors") != sha(models.draft_independent / "model.safetensors")


def test_cache_reuse_and_force(models: ModelSet) -> None:
    stamp = (models.target / "model.safetensors").stat().st_mtime_ns
    again = make_models(models.root.parent)
    assert again == models
    assert (models.target / "model.safetensors").stat().st_mtime_ns == stamp
    forced = make_models(models.root.parent, force=True)
    assert forced.root == models.root
    assert sha(forced.target / "model.safetensors") != "" and (forced.root / "COMPLETE.json").is_file()


def test_deterministic_and_keyed_by_params(models: ModelSet, tmp_path: Path) -> None:
    other = make_models(tmp_path / "a")
    assert other.params_hash == models.params_hash
    assert sha(other.target / "model.safetensors") == sha(models.target / "model.safetensors")
    assert sha(other.draft / "model.safetensors") == sha(models.draft / "model.safetensors")
    changed = make_models(tmp_path / "a", params={"draft_noise": 0.5})
    assert changed.params_hash != models.params_hash and changed.root.parent == other.root.parent
    assert sha(changed.target / "model.safetensors") == sha(models.target / "model.safetensors")
    assert sha(changed.draft / "model.safetensors") != sha(models.draft / "model.safetensors")
    assert params_hash({**PARAMS, "seed": 1}) != params_hash()


def test_incomplete_dir_is_regenerated(models: ModelSet, tmp_path: Path) -> None:
    broken = tmp_path / models.params_hash
    (broken / "target").mkdir(parents=True)
    (broken / "target" / "config.json").write_text("{}")
    fixed = make_models(tmp_path)
    assert (fixed.target / "model.safetensors").is_file() and (fixed.root / "COMPLETE.json").is_file()


def test_tokenizer_round_trip_and_chat_template(models: ModelSet) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(models.target)
    assert len(tok) == 512
    for text in ["Assistant: Of course. 3x + 7 = 25, so x = 6.", "naïve café ✓ 東京 \t\n  spaces", ""]:
        ids = tok.encode(text, add_special_tokens=False)
        assert all(0 <= i < 512 for i in ids)
        assert tok.decode(ids) == text
    assert tok.encode("hello", add_special_tokens=True) == tok.encode("hello", add_special_tokens=False)
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|user|>\nhi\n<|assistant|>\n"
    assert tok.eos_token == "</s>" and tok.bos_token == "<s>"


def test_default_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PERFGATE_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("PERFGATE_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "pytest-perfgate" / "models"


def test_cli_models_make(models: ModelSet, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "make", "--out", str(models.root.parent)]) == 0
    out = capsys.readouterr().out
    assert str(models.target) in out and str(models.draft) in out and "took" in out
    assert main(["models", "make", "--out", str(models.root.parent), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == str(models.target)


def test_models_make_prints_no_library_noise(tmp_path: Path) -> None:
    """``perfgate models make`` as set-up runs it (a fresh process, nothing cached): torchao's kernels
    failing to load on a CPU machine, torch's register_constant deprecation to torchao and
    transformers' shard-writing progress bar are not printed; its own lines are (issue 35)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "models", "make", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "target" in proc.stdout and "took" in proc.stdout
    for noise in ("Failed to load", "register_constant", "Writing model shards"):
        assert noise not in proc.stderr, proc.stderr[-3000:]
