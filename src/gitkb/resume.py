"""``python -m gitkb.resume HOME [OVERRIDES_JSON]``: finish the work a crash left, then exit.

A process that opened a workspace after a crash (jobs requeued, vectors behind
the change log) resumes that work in the background; when it closes first (a
``gitkb status`` answers at once), ``Workspace.close`` starts this detached
process, so the vectors catch up without waiting for some later command. CLI
commands open with ``resume_in_background=True``; a library or server caller
resumes on its next open instead. The process takes the writer lease when it
is free (or leaves the work to whoever holds it), runs queued jobs and the
embedding catch-up, and exits when nothing is left. Its log goes to
``<home>/logs/resume.log``.
"""

from __future__ import annotations

import json
import logging
import sys

from gitkb.services.runtime.writer import finish_left_work
from gitkb.workspace import Workspace

log = logging.getLogger("gitkb.resume")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m gitkb.resume HOME [OVERRIDES_JSON]", file=sys.stderr)
        return 2
    overrides = json.loads(args[1]) if len(args) > 1 else {}
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(message)s")
    ws = Workspace(args[0], **overrides)
    try:
        log.info("resume: %s", finish_left_work(ws.ctx))
    finally:
        ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
