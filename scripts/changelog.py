"""Regenerate CHANGELOG.md from ``git log`` (first-parent and merged commits, merges themselves left out):
commits that name an issue (``issue N``) grouped by the first issue they name, the others by day.

    .venv/bin/python scripts/changelog.py > CHANGELOG.md
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict

HEAD = """# Changelog

All changes of pytest-perfgate 0.1.0 (unreleased), from `git log`: the commits that name an issue
grouped by issue (a commit naming several is under the first), then the others by day. Each line
is the commit subject, shortened; `git show HASH` has the whole message.
"""
ISSUE = re.compile(r"\bissues? #?(\d+)", re.IGNORECASE)


def _short(subject: str, width: int = 180) -> str:
    return subject if len(subject) <= width else subject[: width - 4].rsplit(" ", 1)[0] + " ..."


def main() -> None:
    out = subprocess.run(["git", "log", "--reverse", "--no-merges", "--format=%h%x09%ad%x09%s", "--date=short"],
                         capture_output=True, text=True, check=True).stdout
    by_issue: dict[int, list[str]] = defaultdict(list)
    by_day: dict[str, list[str]] = defaultdict(list)
    for line in out.splitlines():
        sha, day, subject = line.split("\t", 2)
        item = f"- {_short(subject)} (`{sha}`)"
        m = ISSUE.search(subject)
        (by_issue[int(m.group(1))] if m else by_day[day]).append(item)
    parts = [HEAD, "## By issue\n"]
    for n in sorted(by_issue):
        parts.append(f"### Issue {n}\n\n" + "\n".join(by_issue[n]) + "\n")
    parts.append("## Other changes, by day\n")
    for day in sorted(by_day):
        parts.append(f"### {day}\n\n" + "\n".join(by_day[day]) + "\n")
    print("\n".join(parts), end="")


if __name__ == "__main__":
    main()
