"""Files behind datasets: checksums, downloads that never leave half a file, a SHA-256 manifest."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from pathlib import Path

from ampgan.errors import AmpganError, UnwritableFile
from ampgan.files.atomic import write_atomically, write_json_atomically
from ampgan.files.cache_dir import cache_dir
from ampgan.files.jsonfile import parse_json
from ampgan.files.schema import has_shape

MANIFEST_NAME = "ampgan-manifest.json"


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, algorithm).hexdigest()  # read in chunks, never whole


def require_data_dir(data_dir: str | None, dataset: str, download: bool) -> Path:
    if not data_dir:  # None, or "" (--data-dir=$DIR with DIR unset: the current folder, where --download wrote)
        raise AmpganError(f"{dataset} needs --data-dir DIR (where its files are, or where --download should put them)")
    path = Path(data_dir).expanduser()
    if not path.exists():
        if download:
            path.mkdir(parents=True)
            return path
        raise AmpganError(
            f"data dir {path} does not exist: create it and put the {dataset} files there, or add --download"
        )
    if not path.is_dir():
        raise AmpganError(f"--data-dir {path} is a file, not a folder")
    return path


def download(url: str, target: Path, *, expected_md5: str | None = None, timeout: float = 60.0) -> Path:
    """Fetch `url` into `target`: streamed into a temporary file beside it, checked (length, MD5), then renamed
    (files/atomic.py), so the final name only ever holds a complete download; a failure removes the temporary
    file, and one left by a download killed midway goes at the next write there."""
    manual = f"download {url} by hand and put it at {target}"

    def fetch(out) -> None:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            expected_length, md5 = response.headers.get("Content-Length"), hashlib.md5()
            while chunk := response.read(1 << 20):
                out.write(chunk)
                md5.update(chunk)
        if expected_length is not None and out.tell() != int(expected_length):
            raise AmpganError(
                f"the download of {url} broke off after {out.tell()} of {expected_length} bytes: try again, or {manual}"
            )
        if expected_md5 is not None and (found := md5.hexdigest()) != expected_md5:
            raise AmpganError(
                f"the download of {url} has MD5 {found}, expected {expected_md5}: "
                f"the server sent something else; {manual}"
            )

    try:
        write_atomically(target, fetch)
        return target
    except UnwritableFile:
        raise  # the disk refused it (full, read-only): its own one line, not "no network?"
    except urllib.error.HTTPError as error:
        raise AmpganError(f"cannot download {url} (HTTP {error.code}): check the name, or {manual}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise AmpganError(f"cannot download {url} ({reason}): no network? {manual[0].upper() + manual[1:]}") from None


def verify_with_manifest(data_dir: Path, files: list[Path]) -> tuple[dict[str, str], str]:
    """SHA-256 of each file, recorded in a manifest on first sight and checked on every later load.
    Returns (checksums, where the manifest lives).

    For datasets with no published checksums (Quick, Draw!): a file that changes after it was first
    used is caught instead of silently training on different data.
    """
    # Beside the data first; for a read-only data folder, the user's cache folder instead.
    key = hashlib.sha256(str(data_dir.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    locations = [data_dir / MANIFEST_NAME, cache_dir() / "manifests" / f"{data_dir.name}-{key}.json"]
    manifest_path = next((p for p in locations if p.exists()), locations[0])
    manifest: dict[str, str] = {}
    if manifest_path.exists():
        try:
            document = parse_json(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = None
        if not has_shape(document, {"sha256": {"*": str}}):
            raise AmpganError(f"{manifest_path} is damaged: delete it to record the checksums anew")
        manifest = document["sha256"]
    sums = {path.name: file_digest(path) for path in files}
    for path in files:
        digest = sums[path.name]
        if manifest.get(path.name, digest) != digest:
            raise AmpganError(
                f"checksum mismatch: {path} has changed since it was first used (SHA-256 {digest[:12]}..., "
                f"manifest says {manifest[path.name][:12]}...): restore the file, or delete its line in "
                f"{manifest_path} to accept it"
            )
    if sums.keys() - manifest.keys():  # files seen for the first time: recorded
        document = {"sha256": dict(sorted((manifest | sums).items()))}
        try:
            write_json_atomically(manifest_path, document)
        except OSError:  # a read-only data folder: keep the manifest in the cache folder
            manifest_path = locations[1]
            write_json_atomically(manifest_path, document)
    return sums, str(manifest_path)
