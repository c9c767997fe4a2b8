"""A hostile control-socket client for tests/it/hostile.rs (python3 stdlib only).

Run as an unprivileged uid. Opens connections to the socket in argv[1] and misbehaves as argv[2]
says; prints one line `ready N` once it has done so (N = connections it holds open), then holds
everything until its stdin closes.

  readers N REPEAT POD   N connections each send {"cmd":"logs","pod":POD} x REPEAT, never read
  idle N                 N connections that send nothing
  bigids N REPEAT        N connections each send REPEAT `version` requests with 63 KB ids
                         (as much as the kernel takes without blocking), never read
  cap N                  N connections one after the other, each asking `version`; prints the
                         first line the last one got, then `ready`
"""

import json
import resource
import socket
import sys


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def main():
    path, mode = sys.argv[1], sys.argv[2]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = []
    if mode == "readers":
        n, repeat, pod = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        line = (json.dumps({"cmd": "logs", "pod": pod}) + "\n").encode()
        for _ in range(n):
            s = connect(path)
            s.setblocking(False)
            try:
                s.send(line * repeat)
            except BlockingIOError:
                pass
            held.append(s)
    elif mode == "idle":
        n = int(sys.argv[3])
        for _ in range(n):
            try:
                held.append(connect(path))
            except OSError:
                pass
    elif mode == "bigids":
        n, repeat = int(sys.argv[3]), int(sys.argv[4])
        for i in range(n):
            try:
                s = connect(path)
            except OSError:
                continue
            s.setblocking(False)
            data = b"".join(
                b'{"id":"' + (b"%d-" % i) + b"x" * 63000 + b'","cmd":"version"}\n'
                for _ in range(repeat)
            )
            sent = 0
            try:
                while sent < len(data):
                    sent += s.send(data[sent:])
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                pass
            held.append(s)
    elif mode == "cap":
        n = int(sys.argv[3])
        last = ""
        for _ in range(n):
            s = connect(path)
            try:
                s.sendall(b'{"cmd":"version"}\n')
            except OSError:
                pass  # a refused connection may be closed before the request is written
            f = s.makefile("r")
            try:
                last = f.readline().strip()
            except OSError as e:
                last = "read failed: %s" % e
            held.append((s, f))
        print(last, flush=True)
    else:
        sys.exit("unknown mode " + mode)
    print("ready %d" % len(held), flush=True)
    sys.stdin.read()


main()
