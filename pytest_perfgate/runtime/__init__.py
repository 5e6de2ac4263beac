"""Process and machine helpers that know nothing of gates: atomic writes, secret redaction, the device,
busy-machine timeouts, progress lines and third-party import noise."""
