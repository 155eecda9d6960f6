"""The price catalog: hourly instance prices with their source and date (prices.csv here).

Every row names its source and the date of its price; `checked` says where the price was last
confirmed (a public catalog, path and commit). A row without it is shown as unverified beside its
number. Prices age: a catalog older than STALE_AFTER_DAYS says so wherever it is used, with the
way to pass a fresh one (`--prices-from skypilot`, cost/skypilot.py, or `--prices FILE`).
"""

from __future__ import annotations

import csv
import datetime
import difflib
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ampgan.errors import AmpganError
from ampgan.files.jsonfile import read_csv_text
from ampgan.files.schema import table_number
from ampgan.system.hardware import names_device

REQUIRED_COLUMNS = (
    "provider",
    "region",
    "instance",
    "hardware",
    "gpu_count",
    "price_per_hour",
    "currency",
    "source",
    "date",
)

# The largest values a catalog row can mean (no instance has more GPUs or vCPUs, or costs more an hour):
# beyond them a cell is a typo, and a cost computed from it would be nonsense.
MOST_PER_INSTANCE = 100_000
MOST_PER_HOUR = 1_000_000.0


@dataclass(frozen=True)
class Instance:
    provider: str
    region: str
    instance: str
    hardware: str  # a name the measured device's name contains: "T4", "A100-40GB", "Xeon", ...
    gpu_count: int
    price_per_hour: float
    currency: str
    source: str
    date: str
    vcpus: int | None = None
    note: str = ""
    checked: str = ""  # where the price was confirmed; empty: unverified

    @property
    def verified(self) -> bool:
        return bool(self.checked)

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.instance}"

    def matches_hardware(self, device_name: str) -> bool:
        """Does the measured device look like this instance's hardware? 'A100-40GB' matches
        'NVIDIA A100-SXM4-40GB' (every token of it is a whole token of the name: 'L4' is not 'L40S')."""
        return names_device(self.hardware, device_name)


def load_catalog(path: Path | None = None) -> list[Instance]:
    """The shipped catalog, or a user's CSV file in the same format (validated row by row)."""
    if path is None:
        text, origin = resources.files("ampgan.cost").joinpath("prices.csv").read_text("utf-8"), "built-in catalog"
    else:
        text, origin = read_csv_text(path, "price catalog", REQUIRED_COLUMNS), str(path)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise AmpganError(
            f"{origin} lacks the columns {', '.join(missing)}: every row needs {', '.join(REQUIRED_COLUMNS)}"
        )
    instances = []
    for line, row in enumerate(reader, start=2):
        empty = [c for c in REQUIRED_COLUMNS if not (row.get(c) or "").strip()]
        if empty:
            raise AmpganError(f"{origin} line {line}: empty {', '.join(empty)} (every price needs a source and a date)")
        where = f"{origin} line {line}"
        price = table_number(row["price_per_hour"], where, "price_per_hour", most=MOST_PER_HOUR)
        if price <= 0:
            raise AmpganError(f"{where}: price_per_hour must be more than 0, got {price}")
        gpus = table_number(row["gpu_count"], where, "gpu_count", whole=True, most=MOST_PER_INSTANCE)
        vcpus = (row.get("vcpus") or "").strip()
        vcpus = table_number(vcpus, where, "vcpus", whole=True, least=1, most=MOST_PER_INSTANCE) if vcpus else None
        instances.append(
            Instance(
                provider=row["provider"].strip(),
                region=row["region"].strip(),
                instance=row["instance"].strip(),
                hardware=row["hardware"].strip(),
                gpu_count=gpus,
                price_per_hour=price,
                currency=row["currency"].strip(),
                source=row["source"].strip(),
                date=row["date"].strip(),
                vcpus=vcpus,
                note=(row.get("note") or "").strip(),
                checked=(row.get("checked") or "").strip(),
            )
        )
    if not instances:
        raise AmpganError(f"{origin} has no price rows")
    return instances


def cheapest_instance(catalog: list[Instance] | None, hardware: str) -> Instance | None:
    """The catalog instance with the lowest price per GPU whose hardware is this device (by name)."""
    return min(
        (i for i in catalog or () if i.matches_hardware(hardware)),
        key=lambda i: i.price_per_hour / max(1, i.gpu_count),
        default=None,
    )


def find_instance(catalog: list[Instance], name: str) -> Instance:
    """By instance name ('g4dn.xlarge') or provider/instance ('aws/g4dn.xlarge'), case-insensitive."""
    wanted = name.strip().lower().removeprefix("standard_")  # Azure names come with or without it
    hits = [
        i
        for i in catalog
        if wanted
        in (
            i.instance.lower().removeprefix("standard_"),
            i.label.lower(),
            f"{i.provider}/{i.instance.lower().removeprefix('standard_')}",
        )
    ]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise AmpganError(
            f"instance {name!r} is in several providers' lists: name one of {', '.join(i.label for i in hits)}"
        )
    close = difflib.get_close_matches(
        wanted, [i.instance.lower() for i in catalog] + [i.label.lower() for i in catalog], n=3, cutoff=0.5
    )
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise AmpganError(f"unknown instance {name!r}{hint} (see 'ampgan cost --list-instances')")


def catalog_date(catalog: list[Instance]) -> str:
    """The oldest price date in the catalog: the age a report should admit to."""
    return min(i.date for i in catalog)


STALE_AFTER_DAYS = 180


def staleness_warning(date: str, today: datetime.date | None = None) -> str | None:
    """A sentence when prices dated `date` ('2025-01' or '2025-01-31') are older than STALE_AFTER_DAYS."""
    today = today or datetime.date.today()
    try:
        parts = [int(p) for p in date.split("-")]
        dated = datetime.date(parts[0], parts[1] if len(parts) > 1 else 1, parts[2] if len(parts) > 2 else 1)
    except (ValueError, IndexError):
        return f"prices dated {date!r} cannot be aged: check them before budgeting"
    age = (today - dated).days
    if age <= STALE_AFTER_DAYS:
        return None
    return (
        f"prices may be stale: some date from {date}, {age} days ago; pass a fresh catalog with "
        "--prices-from skypilot[:DIR] (SkyPilot's own, refreshed by it) or --prices FILE"
    )
