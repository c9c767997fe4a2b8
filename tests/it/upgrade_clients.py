"""Control-socket clients asking `status` in a loop, for tests/it/upgrade.rs (python3 stdlib only).

  upgrade_clients.py SOCKET N FRESH STOPFILE

N threads, each asking `status` over and over until STOPFILE exists: thread i keeps one
connection and asks one request at a time (i % 4 == 0 or 3), pipelines two requests in one
write (i % 4 == 1), or, with FRESH = 1, connects afresh for every request (i % 4 == 2; else as
0). Every request has its own id; every reply must be `"ok": true` with the id of the request
it answers, in order, one line each, and nothing may come after the last one. Prints one JSON
line: {"answers": total, "threads": [answers per thread], "errors": [what went wrong]}.
"""

import json
import os
import socket
import sys
import threading


def main():
    path, n, fresh, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
    answers = [0] * n
    errors = []
    lock = threading.Lock()

    def fail(what):
        with lock:
            errors.append(what)

    def run(i):
        mode = i % 4
        if mode == 2 and not fresh:
            mode = 0
        pipeline = 2 if mode == 1 else 1
        conn, reader, next_id = None, None, i * 1_000_000
        while not os.path.exists(stop):
            try:
                if conn is None:
                    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    conn.settimeout(30)
                    conn.connect(path)
                    reader = conn.makefile("rb")
                ids = list(range(next_id, next_id + pipeline))
                next_id += pipeline
                conn.sendall(b"".join(b'{"cmd":"status","id":%d}\n' % k for k in ids))
                for k in ids:
                    line = reader.readline()
                    if not line.endswith(b"\n"):
                        fail("thread %d request %d: the connection ended (%r)" % (i, k, line[-200:]))
                        return
                    reply = json.loads(line)
                    if reply.get("id") != k or reply.get("ok") is not True:
                        fail("thread %d request %d: %s" % (i, k, line[:300]))
                        return
                    answers[i] += 1
                if mode == 2:
                    reader.close()
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure is the test's finding
                fail("thread %d: %r" % (i, e))
                return
        if conn is not None:
            # Exactly one answer per request: nothing more is waiting.
            conn.setblocking(False)
            try:
                extra = reader.peek(1)
            except BlockingIOError:
                extra = b""
            if extra:
                fail("thread %d: more than one answer: %r" % (i, extra[:300]))
            conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"answers": sum(answers), "threads": answers, "errors": errors}))


if __name__ == "__main__":
    main()
