#!/usr/bin/env python3
"""Bytes of database per stored action, for bench/cost/run.sh.

Usage: db_bytes.py DB_PATH. Prints "actions=N bytes=N per_action=N": the
pages in use (page_count - freelist_count, times page_size, the WAL's
committed pages included) over the rows of `actions`. Read-only; run it
after the daemon has stopped.
"""
import sqlite3
import sys


def main() -> None:
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    actions = db.execute("SELECT count(*) FROM actions").fetchone()[0]
    used = (pages - free) * size
    per = used / actions if actions else 0
    print(f"actions={actions} bytes={used} per_action={per:.0f}")


if __name__ == "__main__":
    main()
