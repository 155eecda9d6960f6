"""Is a precision faster than fp32 here? Timed on the real training step, with intervals.

    intervals.py  the arithmetic: a speedup's 95% interval from paired rounds, drift of the reference
    rounds.py     interleaved rounds in random order until every interval is settled (or a time cap)
    step_timer.py one precision's real train_step, timed on a resident batch
    decision.py   the one rule (useful = faster beyond the interval), its candidates and its cache
"""
