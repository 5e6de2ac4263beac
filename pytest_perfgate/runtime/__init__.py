"""Process and machine helpers that know nothing of gates: atomic writes, secret redaction, the device,
busy-machine timeouts, progress lines, third-party import noise and the lazy public faces of the packages."""
