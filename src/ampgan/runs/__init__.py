"""Run folders on disk: config.json, metrics.jsonl, sample grids, checkpoints (storage only)."""
