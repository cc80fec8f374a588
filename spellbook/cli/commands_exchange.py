"""`spellbook export` and `spellbook import`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from spellbook.cli.common import ProgressBar, open_hub


def export(args: argparse.Namespace) -> int:
    import uuid

    from spellbook.vault.exports import check_chosen_file, write_chosen_file

    scope = {k: v for k, v in (("category", args.category), ("topic", args.topic)) if v}
    # The index owner writes the export into its exports folder (the only place it writes exports
    # to); this process, the person's own, then prints it or copies it to --out.
    name = f"cli-{uuid.uuid4().hex}.{'json' if args.format == 'json' else 'md'}"
    params: dict[str, Any] = {"format": args.format, "filter": scope or None, "path": name}
    out = args.out.expanduser().absolute() if args.out is not None else None
    if out is not None:
        check_chosen_file(out, force=args.force)  # before the work
    hub = open_hub(args)
    try:
        result = hub.call("export", params)
    finally:
        hub.close()
    written = Path(result["path"])
    try:
        text = written.read_text(encoding="utf-8")
    finally:
        written.unlink(missing_ok=True)
    if out is None:
        sys.stdout.write(text)
    else:
        write_chosen_file(out, text, force=args.force)
        print(f"Exported {result['count']} memories to {out}.", file=sys.stderr)
    if result.get("redacted"):
        print(f"Privacy filter: {result['redacted']}.", file=sys.stderr)
    return 0


def import_(args: argparse.Namespace) -> int:
    from spellbook.engine.formats.spellbook_export import import_summary

    params: dict[str, Any] = {
        "path": str(args.file.expanduser().resolve()),
        "format": args.format,
        "on_conflict": args.on_conflict,
        "dry_run": args.dry_run,
    }
    indexing, importing = ProgressBar("indexing"), ProgressBar("importing", unit="memory")
    hub = open_hub(args, progress=indexing, embeds=not args.dry_run)
    try:
        indexing.finish()
        if hub.role == "owner":
            params["progress"] = importing
        else:
            print(
                "A running Spellbook server owns this index; it imports the file (its progress is not shown here).",
                file=sys.stderr,
            )
        result = hub.call("import_memories", params)
    finally:
        importing.finish()
        hub.close()
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(import_summary(result))
    return 1 if result["counts"]["failed"] else 0
