"""Which device engines run on here: the CUDA device's name, or the CPU (torch imported lazily)."""

from __future__ import annotations

import os


def device_name() -> str:
    """``"cpu"`` or the CUDA device name."""
    try:
        import torch

        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:
        pass
    return "cpu"


def cpu_only() -> bool:
    """True when no CUDA device is visible (the CPU backend of vLLM)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return True
    try:
        import torch

        return not torch.cuda.is_available()
    except Exception:
        return True
