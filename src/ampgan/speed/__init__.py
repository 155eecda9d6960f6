"""Is a precision (or a memory format) faster here? Timed on the real training step, with intervals.

intervals.py  the arithmetic: a speedup's 95% interval from paired rounds, drift of the reference
rounds.py     interleaved rounds in random order until every interval is settled (or a time cap)
step_timer.py one precision's real train_step, timed on a resident batch
decision.py   the one rule (useful = faster beyond the interval), its candidates and its cache
layout.py     the same rule for the memory format: channels-last only where measured faster
"""
