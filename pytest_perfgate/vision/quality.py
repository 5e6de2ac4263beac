"""Feature-quality loss of a quantized tower against its reference, per image.

Two measures on the ``eval`` images, overall and per subset:

* embedding agreement: ``1 - cos(e_ref, e_quant)`` per image (its mean is ``1 - mean cosine``);
* linear-probe top-1 drop: one multinomial logistic probe per subset, fitted on the *reference*
  embeddings of the ``train`` images, scores both towers' embeddings of the same eval images; per
  image ``d = [reference correct] - [quantized correct]`` in {-1, 0, 1}, whose mean is the top-1
  accuracy drop in points.

The top-1 gates (``params = { paired = "discordant" }``) bound the drop as a paired comparison:
exactly, on the discordant images (right with one encoder only; McNemar-style, see
``stats.paired_difference_bounds`` and ``docs/statistics.md``), so the confidence is over images
and a gate passes only when the upper bound is under the threshold. The embedding losses stay
``mean`` gates (record-only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Probe:
    w: Arr  # (d, k)
    b: Arr  # (k,)

    def predict(self, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        return np.asarray(np.argmax(x @ self.w + self.b, axis=1), dtype=np.int64)


def fit_probe(x: npt.NDArray[Any], y: npt.NDArray[np.int64], k: int, l2: float = 1e-3) -> Probe:
    """Multinomial logistic regression (L-BFGS, L2 penalty ``l2``) of ``y`` (0..k-1) on ``x``."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    onehot = np.eye(k)[y]

    def loss(theta: Arr) -> tuple[float, Arr]:
        w = theta[: d * k].reshape(d, k)
        b = theta[d * k :]
        lp = log_softmax(x @ w + b, axis=1)
        p = np.exp(lp)
        g = (p - onehot) / n
        val = -float(np.sum(onehot * lp)) / n + 0.5 * l2 * float(np.sum(w * w))
        grad = np.concatenate([(x.T @ g + l2 * w).ravel(), g.sum(0)])
        return val, grad

    res = minimize(loss, np.zeros(d * k + k), jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return Probe(res.x[: d * k].reshape(d, k), res.x[d * k :])


@dataclass(frozen=True)
class QualityReport:
    """Per eval image: subset, 1 - cosine, reference and quantized probe correctness."""

    path: str
    subsets: tuple[str, ...]
    cos_loss: Arr
    ref_correct: npt.NDArray[np.bool_]
    q_correct: npt.NDArray[np.bool_]
    fine: frozenset[str] = field(default_factory=frozenset)

    def mask(self, which: str) -> npt.NDArray[np.bool_]:
        """``"all"``, ``"fine"`` (the fine-grained subsets), ``"coarse"`` (the others) or a subset."""
        s = np.asarray(self.subsets)
        if which == "all":
            return np.ones(s.size, dtype=bool)
        if which == "fine":
            return np.isin(s, sorted(self.fine))
        if which == "coarse":
            return ~np.isin(s, sorted(self.fine))
        return np.asarray(s == which)

    def drops(self, which: str = "all") -> Arr:
        """Per-image top-1 drop d in {-1, 0, 1} (mean = accuracy drop)."""
        m = self.mask(which)
        return self.ref_correct[m].astype(np.float64) - self.q_correct[m].astype(np.float64)

    def cos_losses(self, which: str = "all") -> Arr:
        return np.asarray(self.cos_loss[self.mask(which)], dtype=np.float64)

    def groups(self) -> list[str]:
        names = ["all"]
        if self.fine:
            names += ["coarse", "fine"]
        return names + sorted(set(self.subsets))

    def table(self) -> list[dict[str, Any]]:
        rows = []
        for g in self.groups():
            m = self.mask(g)
            if not m.any():
                continue
            rows.append({"group": g, "images": int(m.sum()),
                         "ref_top1": float(self.ref_correct[m].mean()), "quant_top1": float(self.q_correct[m].mean()),
                         "top1_drop": float(self.drops(g).mean()), "one_minus_mean_cos": float(self.cos_losses(g).mean())})
        return rows


def evaluate_quality(
    path: str,
    ref_emb: npt.NDArray[Any],
    q_emb: npt.NDArray[Any],
    subsets: Iterable[str],
    labels: npt.NDArray[np.int64],
    train: npt.NDArray[np.bool_],
    classes: Mapping[str, Any],
    fine: frozenset[str] = frozenset(),
) -> QualityReport:
    """Fit one probe per subset on the reference train embeddings; score both on the eval images."""
    subs = np.asarray(list(subsets))
    ev = ~train
    ref_ok = np.zeros(labels.size, dtype=bool)
    q_ok = np.zeros(labels.size, dtype=bool)
    for s, cls in classes.items():
        m = subs == s
        probe = fit_probe(ref_emb[m & train], labels[m & train], len(cls))
        ref_ok[m] = probe.predict(ref_emb[m]) == labels[m]
        q_ok[m] = probe.predict(q_emb[m]) == labels[m]
    cos = np.sum(ref_emb.astype(np.float64) * q_emb.astype(np.float64), axis=1)
    cos /= np.linalg.norm(ref_emb, axis=1) * np.linalg.norm(q_emb, axis=1)
    return QualityReport(path, tuple(subs[ev]), np.asarray(1.0 - cos[ev]), ref_ok[ev], q_ok[ev], fine)


def simulate_drops(rng: np.random.Generator, n: int, drop: float, discordant: float) -> Arr:
    """Per-image paired differences with mean ``drop``: a share ``discordant`` of images change
    their probe answer, split into losses (+1) and gains (-1). Used by the gate's simulation tests."""
    plus = (discordant + drop) / 2
    minus = (discordant - drop) / 2
    if minus < 0 or plus > 1:
        raise ValueError("need discordant >= drop")
    u = rng.random(n)
    return np.where(u < plus, 1.0, np.where(u < plus + minus, -1.0, 0.0))
