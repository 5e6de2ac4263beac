"""Known accelerators, [hardware] / [models] in thresholds.toml, and the embedded engine's start
arguments per device."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.config import ConfigError, load_thresholds
from pytest_perfgate.engines.vllm_inproc import CPU_ONLY_ENV, embedded_start
from pytest_perfgate.floors import config_of, inputs_for_engine
from pytest_perfgate.roofline.hardware import lookup, norm_dtype

BASE = """
[phases.phase1]
[gates.ttft]
phase = "phase1"
metric = "ttft"
statistic = "p99"
max = "150 ms"
engine = "big"
[params.phase1]
prompt_tokens = 8000
[engines.big]
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
model = "Qwen/Qwen2.5-72B-Instruct"
"""
SHAPE = """
[models.big]
num_hidden_layers = 80
hidden_size = 8192
num_attention_heads = 64
num_key_value_heads = 8
intermediate_size = 29568
vocab_size = 152064
"""


def _load(tmp_path: Path, text: str) -> object:
    p = tmp_path / "thresholds.toml"
    p.write_text(text)
    return load_thresholds(p)


@pytest.mark.parametrize(("device", "name"), [
    ("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA B200", "B200"), ("NVIDIA L4", "L4"), ("AMD Instinct MI300X", "MI300X"), ("h200", "H200"),
])  # fmt: skip
def test_device_names_map_to_known_accelerators(device: str, name: str) -> None:
    acc = lookup(device)
    assert acc is not None and acc.name == name and acc.source
    assert acc.peak_flops["bf16"] > 1e14 and acc.mem_bandwidth > 1e11


def test_unknown_device_and_dtype() -> None:
    assert lookup("Tesla K80") is None
    assert norm_dtype("torch.bfloat16") == "bf16" and norm_dtype("auto", "fp32") == "fp32"
    with pytest.raises(ValueError, match="unknown dtype"):
        norm_dtype("fp7")


def test_hardware_and_models_tables(tmp_path: Path) -> None:
    th = _load(tmp_path, BASE + '[hardware]\ngpu = "H200"\ncount = 8\n' + SHAPE)
    fc = config_of(th)  # type: ignore[arg-type]
    assert fc.hardware is not None and fc.hardware.describe() == "8x H200"
    inp = inputs_for_engine(th, "big")  # type: ignore[arg-type]
    assert not isinstance(inp, str)
    assert inp.gpus == 8 and inp.model.total_params() / 1e9 == pytest.approx(72.7, abs=0.05)
    explicit = _load(tmp_path, BASE + '[hardware]\nname = "X1"\ncount = 2\npeak_tflops = { bf16 = 100 }\nmemory_tb_s = 1\n'
                     + SHAPE)
    hw = config_of(explicit).hardware  # type: ignore[arg-type]
    assert hw is not None and hw.peak("bfloat16") == 100e12 and hw.mem_bandwidth == 1e12 and hw.describe() == "2x X1"


@pytest.mark.parametrize(("table", "match"), [
    ('[hardware]\ngpu = "Z9000"\n', r"\[hardware\] gpu: unknown accelerator 'Z9000'"),
    ('[hardware]\ngpu = "H200"\ncount = 0\n', r"\[hardware\] count: must be a positive integer"),
    ('[hardware]\ngpu = "H200"\nflops = 3\n', r"\[hardware\] flops: unknown key"),
    ('[hardware]\npeak_tflops = { bf16 = 100 }\n', r"\[hardware\] memory_tb_s: missing"),
    ('[hardware]\nmemory_tb_s = 1\n', r"\[hardware\] gpu: missing"),
    ('[hardware]\ngpu = "H200"\nexpected_mfu = 1.5\n', r"\[hardware\] expected_mfu: is a share of peak"),
    ('[hardware]\npeak_tflops = { fp7 = 1 }\nmemory_tb_s = 1\n', r"\[hardware\] peak_tflops.fp7: unknown dtype"),
    ('[models.big]\nhidden_size = 8\n', r"\[models.big\] num_hidden_layers:"),
    ('[models.big]\nnum_hidden_layers = -2\n', r"\[models.big\] num_hidden_layers: must be a positive integer"),
    ('[models.big]\nlayerz = 2\n', r"\[models.big\] layerz: unknown key"),
])  # fmt: skip
def test_bad_tables_name_file_table_and_key(tmp_path: Path, table: str, match: str) -> None:
    with pytest.raises(ConfigError, match=r"thresholds.toml: " + match):
        _load(tmp_path, BASE + table)


def test_missing_model_description_is_said(tmp_path: Path) -> None:
    th = _load(tmp_path, BASE + '[hardware]\ngpu = "H200"\n')
    msg = inputs_for_engine(th, "big")  # type: ignore[arg-type]
    assert isinstance(msg, str) and "[models.big]" in msg


def test_embedded_start_arguments_per_device() -> None:
    base = {"model": "/m/target", "dtype": "float32", "gpu_memory_utilization": 0.3, "max_model_len": 8448}
    cpu_args, cpu_env = embedded_start(base, cuda=False)
    assert cpu_args["enforce_eager"] is True and cpu_args["dtype"] == "float32"
    assert cpu_env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    gpu_args, gpu_env = embedded_start(base, cuda=True)
    assert gpu_args["dtype"] == "bfloat16" and gpu_args["enforce_eager"] is True
    assert gpu_args["gpu_memory_utilization"] == 0.3  # an explicit setting wins
    assert not any(k in gpu_env for k in CPU_ONLY_ENV)
    assert embedded_start({"model": "m"}, cuda=True)[0]["gpu_memory_utilization"] == 0.2
    assert embedded_start({"model": "m", "dtype": "float16"}, cuda=True)[0]["dtype"] == "float16"
    assert embedded_start({"model": "m", "enforce_eager": False}, cuda=False)[0]["enforce_eager"] is False


def test_a_known_gpu_plans_with_the_measured_share_of_its_peak() -> None:
    """Issue 26 item 10: expected_mfu defaulted to 1.0 although an H200 prefill measured 53%."""
    from pytest_perfgate.roofline.config import MEASURED_GPU_MFU, parse_hardware

    assert parse_hardware({"gpu": "H200", "count": 8})[1] == MEASURED_GPU_MFU == 0.53
    assert parse_hardware({"gpu": "H200", "count": 8, "expected_mfu": 1.0})[1] == 1.0  # explicit wins
    assert parse_hardware({"peak_tflops": {"bf16": 100}, "memory_tb_s": 1.0})[1] == 1.0  # not a measured GPU


def test_nvl_parts_are_not_matched_as_sxm_and_rocm_devices_are_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26 item 10: H100/H200 NVL read as SXM (18% optimistic); MI300X never detected (NVIDIA-only check)."""
    from pytest_perfgate.roofline import probe
    from pytest_perfgate.roofline.hardware import lookup

    assert lookup("NVIDIA H200 NVL").name == "H200-NVL" and lookup("NVIDIA H100 NVL").name == "H100-NVL"
    assert lookup("NVIDIA H200").name == "H200" and lookup("NVIDIA H100 80GB HBM3").name == "H100"
    assert lookup("NVIDIA H200").peak_flops["bf16"] / lookup("NVIDIA H200 NVL").peak_flops["bf16"] == pytest.approx(1.184, abs=1e-3)
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(probe, "_nvidia_driver", lambda: False)
    monkeypatch.setattr(probe, "_rocm_driver", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "AMD Instinct MI300X")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    hw = probe.detect(probe=False)
    assert hw is not None and hw.describe() == "8x MI300X" and "(ROCm 6.2.41133)" in hw.source
