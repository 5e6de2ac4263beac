"""Load generation: prompts, schedules, the runner, per-request records and derived metrics."""
