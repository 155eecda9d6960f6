"""The machine: what hardware this is, its peak FLOP/s, process tuning, and the stamp on every result."""
