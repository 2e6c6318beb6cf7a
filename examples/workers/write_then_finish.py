#!/usr/bin/env python3
"""A snapnode external worker: it writes the task into a report, then reports COMPLETED.

The node writes JSON lines to standard input (the job request, then one observation
after each answer) and reads one JSON line a step from standard output. Standard
library only. Configure it with agent.command = ["python3", "/path/to/write_then_finish.py"].
"""
import json
import sys
import uuid

REPORT = "/sandbox/report.md"


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()  # one line a step, sent at once


request = json.loads(sys.stdin.readline())  # the job request
answer({
    "schema_version": "1.0.0",
    "id": str(uuid.uuid4()),
    "reasoning": "write the task into the report",
    "action": "WRITE_FILE",
    "args": {"path": REPORT, "content": "# Report\n\n" + request["task_description"] + "\n"},
})

for line in sys.stdin:  # one observation a step, until the node closes the input
    observation = json.loads(line)["observation"]
    if '"outcome":"completed"' in observation:
        answer({"action": "COMPLETED", "evidence_files": [REPORT],
                "summary_for_supervisor": "The report is written."})
    else:
        answer({"action": "STUCK", "evidence_files": [],
                "summary_for_supervisor": "The write was refused: " + observation[:400]})
