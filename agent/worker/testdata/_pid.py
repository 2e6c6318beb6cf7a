# Shared by the misbehaving workers: records the pids a test checks in /proc.
import os


def record(*pids):
    path = os.environ.get("PIDFILE")
    if path:
        with open(path, "a") as f:
            for pid in pids:
                f.write("%d\n" % pid)
