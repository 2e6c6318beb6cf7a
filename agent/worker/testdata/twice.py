# Answers each line twice, as a buggy worker might (a retry that was not
# one, a duplicated write): its answer to a step is written once more
# after the next observation arrived, before its answer to that one. With
# STEPPED=1 it names the step of the line each answer answers; with
# STALE=n it writes n copies of its first answer at once; with
# STEP_SHIFT=n it names the step plus n; with DROP_STEP=k its k-th answer
# (from 0) names no step; with GARBAGE_AT=k its k-th answer is prose; with
# STEP_TWICE=k its k-th answer names its step twice.
import json
import os
import sys
import uuid
import _pid

_pid.record(os.getpid())
stepped = os.environ.get("STEPPED") == "1"
stale = int(os.environ.get("STALE", "0"))
shift = int(os.environ.get("STEP_SHIFT", "0"))
drop = int(os.environ.get("DROP_STEP", "-1"))
garbage = int(os.environ.get("GARBAGE_AT", "-1"))
twice = int(os.environ.get("STEP_TWICE", "-1"))


def answer(step, what, n, named=True):
    if n == garbage:
        return "Sure! Here is my answer.\n"
    a = {"schema_version": "1.0.0", "id": str(uuid.uuid4()), "reasoning": what,
         "action": "THINK", "args": {}}
    if stepped and named:
        a["step"] = step
    if n == twice:
        return json.dumps(a)[:-1] + ', "step": %d}\n' % step
    return json.dumps(a) + "\n"


previous = None
n = 0
for line in sys.stdin:
    msg = json.loads(line)
    step = msg.get("step", 0) + shift
    out = ""
    if previous is not None:
        out += previous  # the late copy of the last answer
    mine = answer(step, "answer to step %d" % msg.get("step", 0), n, named=(n != drop))
    out += mine
    if stale and previous is None:
        out += mine * stale
    previous = mine
    n += 1
    sys.stdout.write(out)
    sys.stdout.flush()
