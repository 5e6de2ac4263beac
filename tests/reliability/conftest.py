from __future__ import annotations

from reliability_helpers import scripted  # noqa: F401  (module-scoped scripted server fixture)
