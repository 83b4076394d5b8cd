"""``bunqueue migrate --from FILE --to FILE``: a data file of the Bun server converted offline.

The same conversion a start on that file does (``bunqueue.storage.bunimport``), with a progress bar on a
terminal (plain lines otherwise) and a summary table, or the summary as JSON with ``--json``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from bunqueue.remote.render import table
from bunqueue.storage.bunimport import Summary, convert_in_place, convert_to, detect
from bunqueue.storage.schema import StorageError

BAR_WIDTH = 30
# Plain progress lines: one per this share of the jobs, not one per written chunk.
LINE_STEP = 0.25


class ProgressReport:
    """Jobs written so far: a bar redrawn in place on a terminal, a few plain lines elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.next_line = 0.0

    def __call__(self, done: int, total: int) -> None:
        share = done / total if total else 1.0
        if self.tty:
            filled = round(share * BAR_WIDTH)
            self.out.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} jobs")
            if done >= total:
                self.out.write("\n")
        elif share >= self.next_line:
            self.out.write(f"converted {done}/{total} jobs\n")
            self.next_line = share + LINE_STEP if share < 1.0 else 2.0
        self.out.flush()


def summary_text(summary: Summary) -> str:
    head = [f"source: {summary.source} (Bun server schema {summary.schema_version})", f"target: {summary.target}"]
    if summary.backup:
        head.append(f"backup: {summary.backup}")
    rows = [{"what": what, "count": n} for what, n in summary.rows()]
    body = table(rows, (("what", lambda r: r["what"]), ("count", lambda r: r["count"])), "nothing converted")
    return "\n".join(head) + "\n\n" + body


def run(source: str, target: str, as_json: bool) -> int:
    """Convert ``source`` into ``target`` (in place, keeping a backup, when they are the same file)."""
    try:
        found = detect(source)
        if found is None:
            raise StorageError(f"{source} is not a data file of the Bun server (absent, empty or already converted)")
        progress = None if as_json else ProgressReport(sys.stderr)
        if Path(source).resolve() == Path(target).resolve():
            summary = convert_in_place(found, progress)
        else:
            summary = convert_to(found, target, progress)
    except StorageError as exc:
        print(f"bunqueue migrate: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary.to_dict()) if as_json else summary_text(summary))
    return 0
