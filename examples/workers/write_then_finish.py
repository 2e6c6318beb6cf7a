#!/usr/bin/env python3
"""A snapnode external worker: it writes the task into a report, then reports COMPLETED.

The node writes JSON lines to standard input (the job request, then one observation
after each answer) and reads one JSON line a step from standard output. Each line
the node writes names its step; each answer names the step it answers, so that the
node never takes a late line for the answer to another step. Standard
library only. Configure it with agent.command = ["python3", "/path/to/write_then_finish.py"].
"""
import json
import sys
import uuid

REPORT = "/sandbox/report.md"


def answer(step, obj):
    obj["step"] = step  # the step of the line answered
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()  # one line a step, sent at once


request = json.loads(sys.stdin.readline())  # the job request
answer(request["step"], {
    "schema_version": "1.0.0",
    "id": str(uuid.uuid4()),
    "reasoning": "write the task into the report",
    "action": "WRITE_FILE",
    "args": {"path": REPORT, "content": "# Report\n\n" + request["task_description"] + "\n"},
})

for line in sys.stdin:  # one observation a step, until the node closes the input
    msg = json.loads(line)
    observation = msg["observation"]
    if '"outcome":"completed"' in observation:
        answer(msg["step"], {"action": "COMPLETED", "evidence_files": [REPORT],
                             "summary_for_supervisor": "The report is written."})
    else:
        answer(msg["step"], {"action": "STUCK", "evidence_files": [],
                             "summary_for_supervisor": "The write was refused: " + observation[:400]})
