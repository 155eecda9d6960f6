"""Record the README's example answer with the code as it is: run the README's first command (`ampgan
compare`, default settings) and write what it printed between the README's answer markers, with the
machine it ran on. tests/test_docs.py checks the recorded block against the verdict's current format.

    python benchmarks/readme_answer.py [--out runs/readme-answer]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from ampgan.system.processes import python_command

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- answer:begin -->", "<!-- answer:end -->"


def recorded_block(readme: str) -> list[str]:
    """The lines of the fenced block between the markers (what the command printed)."""
    inside = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    fenced = inside.split("```")[1] if inside.count("```") >= 2 else ""
    return [line for line in fenced.splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/readme-answer"))
    args = parser.parse_args()
    command = python_command("-m", "ampgan", "compare", "--out", str(args.out), "--overwrite", "--quiet")
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        print(result.stderr[-2000:], file=sys.stderr)
        return result.returncode
    answer = [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("report:")]
    readme_path = ROOT / "README.md"
    readme = readme_path.read_text()
    if BEGIN not in readme or END not in readme:
        print(f"README.md has no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    family = re.search(r"CPU family:\s*(\d+)", lscpu)
    machine = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), "?")
    block = "\n".join(
        [
            BEGIN,
            "```",
            *answer,
            "```",
            f"(recorded by `python benchmarks/readme_answer.py` on a {os.cpu_count()}-core {machine}"
            + (f", CPU family {family.group(1)}" if family else "")
            + ")",
            END,
        ]
    )
    head, rest = readme.split(BEGIN, 1)
    readme_path.write_text(head + block + rest.split(END, 1)[1])
    print("\n".join(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
