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
  slowloris N EVERY MAX  N connections each sending one byte of a request every EVERY seconds,
                         never a newline, for at most MAX seconds; prints `closed K` (how many
                         vigil closed) and each first line they got, then `ready 0`
  bigline MB             one connection sending MB MiB without a newline (as far as vigil
                         takes it); prints the first line it got and `eof` if vigil closed
  midclose N POD         N times: ask for the logs of POD, read one byte, close
  scm N                  N connections each sending `version` with an SCM_RIGHTS descriptor
                         attached; prints each reply
  events N REPEAT        N connections each send REPEAT `events` requests (every other one an
                         `events -f` first), as much as the kernel takes, never read
  pipedie N REPEAT       N connections each send REPEAT `version` requests (as much as the kernel
                         takes), never read, and close 0.3 s later
  swap TARGET SECONDS    for SECONDS: put its own socket at the path (vigil's is taken away), and
                         the moment vigil removes it to bind again, a symlink to TARGET in its
                         place; prints `ready TRIES`
  manyuids U PER BASE    (started as root) U children, uids BASE..BASE+U-1, each opening PER
                         idle connections as its uid; held until stdin closes
  pipeline U PER BASE REPEAT
                         (started as root) U children, uids BASE..BASE+U-1, each opening PER
                         connections as its uid that send REPEAT requests alternating `events`
                         and `status` (every other connection an `events -f` first), as much
                         as the kernel takes, and never read; held until stdin closes
  pipesmall U PER BASE REPEAT POD
                         as pipeline, but each request is small to answer: alternating
                         `status POD` and `events` of POD (one pod's status and its few
                         events), no followers
"""

import os
import select
import time

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
    elif mode == "slowloris":
        n, every, most = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
        conns = [connect(path) for _ in range(n)]
        got = {}
        end = time.monotonic() + most
        payload = b'{"cmd":"version","id":"' + b"x" * 100000
        i = 0
        while len(got) < n and time.monotonic() < end:
            for k, s in enumerate(conns):
                if k in got:
                    continue
                try:
                    s.send(payload[i % len(payload):i % len(payload) + 1])
                except OSError:
                    pass
                r, _, _ = select.select([s], [], [], 0)
                if r:
                    data = b""
                    try:
                        while not data.endswith(b"\n"):
                            chunk = s.recv(4096)
                            if not chunk:
                                break
                            data += chunk
                    except OSError:
                        pass
                    got[k] = data.decode(errors="replace").strip() or "eof"
            i += 1
            time.sleep(every)
        print("closed %d" % len(got), flush=True)
        for k in sorted(got):
            print(got[k], flush=True)
        held.extend(conns)
    elif mode == "bigline":
        mib = int(sys.argv[3])
        s = connect(path)
        s.settimeout(20)
        chunk = b"x" * 65536
        try:
            for _ in range(mib * 16):
                s.sendall(chunk)
        except OSError:
            pass
        f = s.makefile("rb")
        try:
            print(f.readline().decode(errors="replace").strip(), flush=True)
            print("eof" if f.read() == b"" else "more", flush=True)
        except ConnectionResetError:
            print("eof", flush=True)  # closed with our bytes unread: a reset
        except OSError as e:
            print("read failed: %s" % e, flush=True)
        held.append(s)
    elif mode == "midclose":
        n, pod = int(sys.argv[3]), sys.argv[4]
        line = (json.dumps({"cmd": "logs", "pod": pod}) + "\n").encode()
        for _ in range(n):
            s = connect(path)
            s.sendall(line)
            s.recv(1)
            s.close()
    elif mode == "scm":
        n = int(sys.argv[3])
        for _ in range(n):
            s = connect(path)
            passed = os.open("/dev/null", os.O_RDONLY)
            socket.send_fds(s, [b'{"id":1,"cmd":"version"}\n'], [passed])
            os.close(passed)
            s.settimeout(20)
            print(s.makefile("r").readline().strip(), flush=True)
            held.append(s)
    elif mode == "events":
        n, repeat = int(sys.argv[3]), int(sys.argv[4])
        plain = b'{"cmd":"events"}\n' * repeat
        follow = b'{"cmd":"events","follow":true}\n'
        for i in range(n):
            try:
                s = connect(path)
            except OSError:
                continue
            s.setblocking(False)
            try:
                s.send(follow + plain if i % 2 else plain)
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                pass
            held.append(s)
    elif mode == "pipedie":
        n, repeat = int(sys.argv[3]), int(sys.argv[4])
        batch = b'{"cmd":"version"}\n' * repeat
        conns = []
        for _ in range(n):
            s = connect(path)
            s.setblocking(False)
            try:
                s.send(batch)
            except BlockingIOError:
                pass
            conns.append(s)
        time.sleep(0.3)  # vigil answers some of them meanwhile
        for s in conns:
            s.close()
    elif mode == "swap":
        target, seconds = sys.argv[3], float(sys.argv[4])
        end = time.monotonic() + seconds
        tries = 0
        while time.monotonic() < end:
            try:
                os.unlink(path)
            except OSError:
                pass
            own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                own.bind(path)
                ino = os.lstat(path).st_ino
            except OSError:
                own.close()
                continue
            tries += 1
            # Wait (briefly) for vigil to take the path back, then race a symlink in.
            until = time.monotonic() + 0.05
            while time.monotonic() < until:
                try:
                    if os.lstat(path).st_ino != ino:
                        break
                except FileNotFoundError:
                    break
            try:
                os.unlink(path)
            except OSError:
                pass
            try:
                os.symlink(target, path)
            except OSError:
                pass
            own.close()
            time.sleep(0.01)
        print("ready %d" % tries, flush=True)
        sys.stdin.read()
        return
    elif mode == "churn":
        # Hold what gets in, then connect and hang up as fast as it can for SECONDS: every
        # connection beyond the cap is one accept(2) more for vigil.
        n, seconds = int(sys.argv[3]), float(sys.argv[4])
        for _ in range(n):
            try:
                held.append(connect(path))
            except OSError:
                pass
        print("ready %d" % len(held), flush=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                connect(path).close()
            except OSError:
                time.sleep(0.001)
        sys.stdin.read()
        return
    elif mode in ("manyuids", "pipeline", "pipesmall"):
        uids, per, base = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        batch = b""
        follow = b'{"cmd":"events","follow":true}\n'
        if mode == "pipeline":
            pair = b'{"cmd":"events"}\n{"cmd":"status"}\n'
            batch = pair * (int(sys.argv[6]) // 2)
        elif mode == "pipesmall":
            pod = json.dumps(sys.argv[7])
            pair = ('{"cmd":"status","pod":%s}\n{"cmd":"events","pod":%s}\n' % (pod, pod)).encode()
            batch = pair * (int(sys.argv[6]) // 2)
            follow = b""
        total = 0
        for u in range(uids):
            r, w = os.pipe()
            hold_r, hold_w = os.pipe()
            if os.fork() == 0:
                os.close(r)
                os.close(hold_w)
                for fd in held:
                    os.close(fd)
                os.setgroups([])
                os.setgid(base + u)
                os.setuid(base + u)
                mine = []
                for i in range(per):
                    try:
                        s = connect(path)
                    except OSError:
                        continue
                    mine.append(s)
                    if batch:
                        s.setblocking(False)
                        try:
                            s.send(follow + batch if i % 2 else batch)
                        except OSError:
                            pass
                os.write(w, b"%d\n" % len(mine))
                os.close(w)
                os.read(hold_r, 1)  # EOF when the parent goes
                os._exit(0)
            os.close(w)
            os.close(hold_r)
            total += int(os.read(r, 64).decode().strip() or "0")
            os.close(r)
            held.append(hold_w)
        print("ready %d" % total, flush=True)
        sys.stdin.read()
        return
    else:
        sys.exit("unknown mode " + mode)
    print("ready %d" % len(held), flush=True)
    sys.stdin.read()


main()
