# Answers every step with COMPLETED, its environment and working directory in the summary.
import json
import os
import sys

for line in sys.stdin:
    msg = json.loads(line)
    env = sorted(k for k in os.environ if k not in ("PWD", "SHLVL", "_", "LC_CTYPE"))
    summary = json.dumps({"env": env, "cwd": os.getcwd(), "first": "task_description" in msg,
                          "msg": msg})[:500]
    sys.stdout.write(json.dumps({"action": "COMPLETED", "evidence_files": [],
                                 "summary_for_supervisor": summary}) + "\n")
    sys.stdout.flush()
