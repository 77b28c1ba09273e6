"""Archive finished runs' metrics rows for the repository: metrics.jsonl -> metrics.jsonl.gz.

    python -m benchmarks.scores.archive_rows <run dir or metrics file> [...]

Each float keeps 6 significant digits (what any table or curve reads of it; full float precision
is noise that gzip cannot shrink), except the row's wall-clock `time`, kept whole. Written with
gzip -9 and no timestamp, so archiving the same rows twice gives the same bytes. `plot`,
`benchmark` and the benchmark scripts read the .gz like the live file; an already archived
metrics.jsonl.gz is rewritten the same way.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

EXACT = {"time"}  # unix seconds: 6 digits would lose the seconds


def rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {key: float(f"{value:.6g}") if isinstance(value, float) and key not in EXACT else value for key, value in row.items()}


def archive(path: Path) -> Path:
    source = path / "metrics.jsonl" if path.is_dir() and (path / "metrics.jsonl").is_file() else path
    if source.is_dir():
        source = source / "metrics.jsonl.gz"
    data = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    text = "".join(json.dumps(rounded(row)) + "\n" for row in rows)
    target = source.with_name("metrics.jsonl.gz")
    target.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    if source != target:
        source.unlink()
    return target


def main(argv: list[str]) -> None:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        raise SystemExit(2)
    for name in argv:
        path = Path(name)
        if not path.exists():
            print(f"error: {name}: no such run directory or metrics file", file=sys.stderr)
            raise SystemExit(2)
        before = sum(p.stat().st_size for p in (path.glob("metrics.jsonl*") if path.is_dir() else [path]))
        target = archive(path)
        print(f"{target}: {before:,} -> {target.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
