"""What a gate run keeps: per-request records and evaluated data (:mod:`.records`), the SQLite run
history (:mod:`.history`), baseline comparison (:mod:`.baseline`) and dashboard exports
(:mod:`.export`). No pytest imports; numpy is imported only by the functions that need it."""
