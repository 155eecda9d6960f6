"""SIGINT/SIGTERM/SIGHUP and the other STOP_SIGNALS (errors.py): finish the current step, save what is finished,
exit 128 + the signal's number (130, 143, 129, ...) saying what was kept.

Training writes a checkpoint and prints a resume hint; a benchmark writes the batch sizes it
finished, marked incomplete."""

from __future__ import annotations

import signal

from ampgan.trust import resume_command


class Interrupted(Exception):
    """A command stopped by a signal after saving what it had finished; the message says what."""

    def __init__(self, signum: int, message: str):
        self.signum = signum
        super().__init__(f"{signal.Signals(signum).name} received: {message}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP


class TrainingInterrupted(Interrupted):
    def __init__(self, signum: int, step: int, run_dir: str, model: str):
        self.step, self.run_dir = step, run_dir
        super().__init__(
            signum, f"stopped after step {step} and saved a checkpoint; continue with: {resume_command(run_dir, model)}"
        )
