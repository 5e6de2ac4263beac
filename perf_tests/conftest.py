"""Shared fixtures of the roadmap's gate suite. Runs are kept with the framework
(``perfgate_engines.run(..., keep_as=NAME)``, ``perfgate.runs[NAME]``); phase 2's workload and its
vision set-up (encoder, images, reference embeddings) are fixtures here, used by its gate and
fallback tests.
"""

from __future__ import annotations

import pytest

from pytest_perfgate import Thresholds, vision


@pytest.fixture(scope="session")
def phase2(perfgate_thresholds: Thresholds) -> vision.Phase2:
    """``[params.phase2]`` on this machine's device (its ``embedded`` table for the embedded encoder)."""
    return vision.Phase2.parse(perfgate_thresholds.params.get("phase2", {}), vision.device())


@pytest.fixture(scope="session")
def encoders(phase2: vision.Phase2) -> vision.VisionSetup:
    """Encoder, images and reference embeddings, built once per session; every quantization path's
    result is kept in its ``results``."""
    s = vision.setup(phase2.as_mapping())
    vision.reference_result(s, phase2.timing_batches)
    return s
