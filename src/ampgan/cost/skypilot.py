"""Prices from the SkyPilot catalogs cloud users already keep (`~/.sky/catalogs/<version>/<cloud>/vms.csv`).

SkyPilot refreshes these CSVs itself; ampgan only reads them. Each cloud's file has the columns
InstanceType, AcceleratorName, AcceleratorCount, Price, SpotPrice and Region (in its own order;
zones repeat a region's price). Two shapes occur:
- AWS and Azure: one row per instance, with its accelerators and the whole instance's price.
- GCP: GPU machine types (a2, a3, g2) carry no accelerator and price the host only; the GPUs are
  rows of their own (no InstanceType) priced per count. ampgan adds the two, so an offering always
  costs what the whole machine costs. GPUs that attach to N1 hosts (T4, V100, P100, ...) are priced
  on an n1-standard-4 host, the smallest that takes one GPU for training, and say so.
Accelerator names are mapped to ampgan's hardware names ("A100" -> "A100-40GB"); CPU-only
instances get a vendor from their family name where the cloud's naming says it (m7i = Intel,
m7a = AMD, ...), else they are skipped: ampgan could not match them to a measured CPU.
"""

from __future__ import annotations

import csv
import datetime
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ampgan.cost.catalog import MOST_PER_INSTANCE, Instance
from ampgan.errors import AmpganError
from ampgan.files.schema import table_number

DEFAULT_DIR = Path.home() / ".sky" / "catalogs"
CLOUDS = ("aws", "gcp", "azure")
# The region a price is quoted from when the user names none: the one the built-in catalog uses.
DEFAULT_REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "SpotPrice", "Region")
# GCP lists unavailable GPUs with a placeholder price; no real GPU-hour costs this much.
_PLACEHOLDER_PRICE = 700.0

# SkyPilot's accelerator names -> ampgan's hardware names (what a measured device's name contains).
ACCELERATOR_HARDWARE = {
    "A100": "A100-40GB",
    "A100-80GB": "A100-80GB",
    "H100": "H100",
    "H100-MEGA": "H100",
    "H200": "H200",
    "L4": "L4",
    "T4": "T4",
    "V100": "V100",
    "V100-32GB": "V100",
    "P100": "P100",
    "A10G": "A10G",
    "A10": "A10",
    "L40S": "L40S",
    "K80": "K80",
    "P4": "P4",
    "B200": "B200",
}
# GCP machine types whose GPUs are priced on rows of their own: (accelerator, count).
_GCP_BUNDLED = [
    (re.compile(r"^a2-highgpu-(\d+)g$"), "A100", None),
    (re.compile(r"^a2-megagpu-(\d+)g$"), "A100", None),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), "A100-80GB", None),
    (re.compile(r"^a3-highgpu-(\d+)g$"), "H100", None),
    (re.compile(r"^a3-megagpu-(\d+)g$"), "H100-MEGA", None),
    (re.compile(r"^a3-ultragpu-(\d+)g$"), "H200", None),
    (re.compile(r"^g2-standard-(4|8|12|16|32)$"), "L4", 1),
]
_GCP_ATTACHABLE_HOST = "n1-standard-4"
# CPU vendor from the instance family, where the cloud's naming says it.
_CPU_VENDOR = [
    ("aws", re.compile(r"^[a-z]+\d+[a-z]*i[a-z]*\."), "Xeon"),  # m7i, c7i, r7iz, m6in ...
    ("aws", re.compile(r"^[a-z]+\d+[a-z]*a[a-z]*\."), "EPYC"),  # m7a, c6a, r7a ...
    ("gcp", re.compile(r"^(c3d|c4d|n2d|t2d|c2d|m3d)-"), "EPYC"),
    ("gcp", re.compile(r"^(c3|c4|n2|c2|m3|n4|h3)-"), "Xeon"),
    ("azure", re.compile(r"^(Standard_)?[A-Z]+\d+[a-z]*a[a-z]*_v\d"), "EPYC"),  # D2as_v5, E4as_v5 ...
]


@dataclass(frozen=True)
class SkyPilotSource:
    folder: Path
    files: tuple[Path, ...]
    version: str

    def describe(self) -> str:
        return f"SkyPilot catalog {self.version} in {self.folder}"


def find_catalogs(spec: str | None) -> SkyPilotSource:
    """`skypilot` or `skypilot:DIR`: DIR (default ~/.sky/catalogs) holds <version>/<cloud>/vms.csv;
    the highest version present is read."""
    folder = Path(spec).expanduser() if spec else DEFAULT_DIR
    if not folder.is_dir():
        raise AmpganError(
            f"no SkyPilot catalogs at {folder}: run 'sky check' (SkyPilot fetches them) or give "
            "--prices-from skypilot:DIR"
        )
    versions = sorted(
        (p for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"v\d+", p.name)), key=lambda p: int(p.name[1:])
    )
    for version in reversed(versions):
        files = tuple(version / cloud / "vms.csv" for cloud in CLOUDS if (version / cloud / "vms.csv").is_file())
        if files:
            return SkyPilotSource(folder, files, version.name)
    raise AmpganError(
        f"{folder} has no <version>/<cloud>/vms.csv (e.g. v8/aws/vms.csv): is it SkyPilot's catalog folder?"
    )


def load_skypilot(source: SkyPilotSource, spot: bool = False, regions: dict[str, str] | None = None) -> list[Instance]:
    """Every priced offering of every cloud's file, in its default region (or the one given)."""
    regions = DEFAULT_REGION | (regions or {})
    instances = []
    for path in source.files:
        instances += _offerings(
            path.parent.name,
            _read_rows(path),
            path,
            datetime.date.fromtimestamp(path.stat().st_mtime).isoformat(),  # the file's date: when SkyPilot fetched it
            spot,
            regions[path.parent.name],
            source.version,
        )
    if not instances:
        raise AmpganError(f"{source.describe()} has no priced instance in regions {', '.join(regions.values())}")
    return instances


def _read_rows(path: Path) -> list[tuple[int, dict]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise AmpganError(f"{path} lacks the columns {', '.join(missing)}: not a SkyPilot vms.csv")
            return list(enumerate(reader, start=2))
    except UnicodeDecodeError:
        raise AmpganError(f"{path} is not a text CSV file (not UTF-8): not a SkyPilot vms.csv") from None
    except csv.Error as error:
        raise AmpganError(f"{path} is not a readable CSV ({error})") from None


def _price(row: dict, column: str, path: Path, line: int) -> float | None:
    """The row's price in `column`; None when it has none (an empty cell, or GCP's placeholder)."""
    text = (row.get(column) or "").strip()
    try:
        value = float(text) if text else None
    except ValueError:
        raise AmpganError(f"{path} line {line}: {column} {text!r} is not a number") from None
    if value is not None and not (math.isfinite(value) and value > 0):
        raise AmpganError(f"{path} line {line}: {column} must be a positive, finite number, got {text}")
    return None if value is None or value >= _PLACEHOLDER_PRICE else value


def _count(row: dict, path: Path, line: int) -> int:
    text = (row.get("AcceleratorCount") or "").strip()
    return (
        table_number(text, f"{path} line {line}", "AcceleratorCount", whole=True, most=MOST_PER_INSTANCE) if text else 0
    )


def _offerings(cloud, rows, path, date, spot, region, version) -> list[Instance]:
    kind = "spot" if spot else "on-demand"
    source = f"SkyPilot catalog {version}/{cloud}/vms.csv ({kind}, {region})"

    def offering(name: str, hardware: str, count: int, price: float, note: str = "") -> Instance:
        return Instance(
            cloud,
            region,
            name,
            hardware,
            count,
            price,
            "USD",
            source,
            date,
            note=note + f"{kind} price",
            checked=source,
        )

    hosts, gpus, out, seen = {}, {}, [], set()
    for line, row in rows:
        if row["Region"].strip() != region:
            continue
        name, accelerator = row["InstanceType"].strip(), row["AcceleratorName"].strip()
        price = _price(row, "SpotPrice" if spot else "Price", path, line)
        if price is None:
            continue
        if not name and accelerator:  # a GCP GPU priced on its own
            gpus.setdefault((accelerator, _count(row, path, line)), price)
            continue
        if (name, accelerator) in seen:
            continue  # another zone of the same region: same price
        seen.add((name, accelerator))
        hosts[name] = price
        if accelerator and ACCELERATOR_HARDWARE.get(accelerator):
            out.append(offering(name, ACCELERATOR_HARDWARE[accelerator], _count(row, path, line), price))
        elif not accelerator and (cloud != "gcp" or not _bundled(name)):
            vendor = next((v for c, pattern, v in _CPU_VENDOR if c == cloud and pattern.match(name)), None)
            if vendor:
                out.append(offering(name, vendor, 0, price))
    return out + (_gcp_gpu_machines(hosts, gpus, offering) if cloud == "gcp" else [])


def _bundled(name: str) -> tuple[str, int] | None:
    for pattern, accelerator, fixed in _GCP_BUNDLED:
        match = pattern.match(name)
        if match:
            return accelerator, fixed or int(match.group(1))
    return None


def _gcp_gpu_machines(hosts: dict, gpus: dict, offering) -> list[Instance]:
    """GCP's GPU machines: a bundled machine type's host price plus its GPUs', and each GPU that attaches to
    an N1 host on an n1-standard-4."""
    out = []
    for name, host_price in hosts.items():
        bundled = _bundled(name)
        if bundled in gpus and ACCELERATOR_HARDWARE.get(bundled[0]):
            accelerator, count = bundled
            note = f"host {host_price:g} + {count} x {accelerator} {gpus[bundled]:g}; "
            out.append(offering(name, ACCELERATOR_HARDWARE[accelerator], count, host_price + gpus[bundled], note))
    host = hosts.get(_GCP_ATTACHABLE_HOST)
    bundled_accelerators = {accelerator for _, accelerator, _ in _GCP_BUNDLED}
    for (accelerator, count), price in gpus.items():
        hardware = ACCELERATOR_HARDWARE.get(accelerator)
        if host is not None and hardware and accelerator not in bundled_accelerators and count == 1:
            note = f"GPU {price:g} on an {_GCP_ATTACHABLE_HOST} host {host:g}; "
            out.append(offering(f"{_GCP_ATTACHABLE_HOST}+{accelerator.lower()}", hardware, 1, host + price, note))
    return out
