#!/usr/bin/env python3
"""vigil soak: many restarts of crash-looping containers, many probes and many status
queries in one run of a release vigil; prints start/end figures of vigil's RSS, open
descriptors and pipes, and checks for zombies, leftover cgroups and leftover processes.

Run through tests/soak/run.sh (which builds the release binary). Not a test of speed: the
figures are for the report, the checks are pass/fail.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--vigil", required=True)
    p.add_argument("--restarts", type=int, default=10_000)
    p.add_argument("--probes", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--crashers", type=int, default=8, help="crash-looping containers")
    p.add_argument("--probed", type=int, default=20, help="probed containers")
    p.add_argument("--period", type=float, default=0.01, help="probe period in seconds")
    p.add_argument("--timeout", type=float, default=1800, help="give up after this long")
    return p.parse_args()


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.startswith("cgroup2 "):
                return left.split()[4]
    return None


class Counter:
    """A TCP listener that counts connections (each tcp_socket probe is one)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.stop = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.count += 1
            conn.close()


def figures(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    fds = os.listdir(f"/proc/{pid}/fd")
    pipes = 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                pipes += 1
        except OSError:
            pass
    return {"rss_kib": rss, "fds": len(fds), "pipes": pipes, "zombies": len(zombies(pid))}


def children_states(ppid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        state, parent = rest[0], int(rest[1])
        if parent == ppid:
            out.append((int(entry), state))
    return out


def zombies(ppid):
    return [pid for pid, st in children_states(ppid) if st == "Z"]


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb")

    def request(self, obj):
        self.file.write(json.dumps(obj).encode() + b"\n")
        self.file.flush()
        return json.loads(self.file.readline())


def main():
    a = parse_args()
    mount = cgroup2_mount()
    scratch = None
    if mount and os.access(mount, os.W_OK):
        scratch = os.path.join(mount, f"vigil-soak-{os.getpid()}")
    work = tempfile.mkdtemp(prefix="vigil-soak-")
    sock = os.path.join(work, "vigil.sock")
    counter = Counter()
    pods = [
        "[supervisor]",
        f'socket = "{sock}"',
        f'cgroup_root = "{scratch}"' if scratch else 'cgroup_root = "none"',
        "log_forward = false",
        "shutdown_timeout_seconds = 30",
        "",
    ]
    for i in range(a.crashers):
        pods += [
            f"[pods.crash{i}]",
            'restart_policy = "Always"',
            "backoff = { initial_seconds = 0.01, max_seconds = 0.01 }",
            f"[[pods.crash{i}.containers]]",
            'name = "c"',
            'command = ["/bin/sh", "-c", "echo crash; exit 3"]',
            "",
        ]
    for i in range(a.probed):
        pods += [
            f"[pods.probed{i}]",
            f"[[pods.probed{i}.containers]]",
            'name = "c"',
            'command = ["sleep", "100000"]',
            f"[pods.probed{i}.containers.readiness_probe]",
            f"tcp_socket = {{ port = {counter.port} }}",
            f"period_seconds = {a.period}",
            "timeout_seconds = 1",
            "",
        ]
    config = os.path.join(work, "vigil.toml")
    with open(config, "w") as f:
        f.write("\n".join(pods))
    log = open(os.path.join(work, "vigil.log"), "w")
    env = dict(os.environ, VIGIL_LOG="warn")
    vigil = subprocess.Popen([a.vigil, "run", "-c", config], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        if time.monotonic() > deadline or vigil.poll() is not None:
            sys.exit(f"vigil did not start; log in {work}/vigil.log")
        time.sleep(0.05)
    time.sleep(1.0)
    client = Client(sock)
    crash_pods = [f"crash{i}" for i in range(a.crashers)]

    def quiet_figures():
        """Figures with the crash loops paused (stopped), so no run is in flight: the
        baseline to compare, including zombies (none may be left once they are stopped)."""
        for p in crash_pods:
            assert client.request({"cmd": "stop", "pod": p})["ok"]
        settle = time.monotonic() + 10
        while True:
            pods = client.request({"cmd": "status"})["result"]["pods"]
            if all("terminated" in c["state"] for p in pods if p["name"].startswith("crash")
                   for c in p["containers"]) or time.monotonic() > settle:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        # Probes keep running: take the floor of a few samples so a probe socket that
        # happens to be open at the sampling moment does not count as a leak.
        samples = []
        for _ in range(10):
            samples.append(figures(vigil.pid))
            time.sleep(0.05)
        f = {k: min(x[k] for x in samples) for k in samples[0]}
        for p in crash_pods:
            assert client.request({"cmd": "start", "pod": p})["ok"]
        return f

    start = quiet_figures()
    t0 = time.monotonic()
    print(f"soak: cgroup_root={scratch or 'none'} crashers={a.crashers} probed={a.probed} "
          f"period={a.period}s", flush=True)
    print(f"start: {start}", flush=True)

    def restarts():
        pods = client.request({"cmd": "status"})["result"]["pods"]
        return sum(c["restart_count"] + 1 for p in pods if p["name"].startswith("crash")
                   for c in p["containers"])

    queries = 0
    probes0 = counter.count
    peak = dict(start)
    mid = None
    ok = True
    base_restarts = restarts()
    while True:
        # Status queries (mostly one pod, every 50th all pods) interleave with the restarts
        # and probes vigil is doing.
        for i in range(200):
            req = {"id": queries, "cmd": "status"}
            if i % 50:
                req["pod"] = f"probed{i % max(a.probed, 1)}" if a.probed else "crash0"
            r = client.request(req)
            assert r["ok"], r
            queries += 1
        done_r = restarts() - base_restarts
        done_p = counter.count - probes0
        queries += 1
        f = figures(vigil.pid)
        for k in ("rss_kib", "fds", "pipes"):
            peak[k] = max(peak[k], f[k])
        if mid is None and done_r >= a.restarts // 2 and done_p >= a.probes // 2 \
                and queries >= a.queries // 2:
            mid = quiet_figures()
            print(f"mid:   {mid}  (restarts={done_r} probes={done_p} queries={queries})",
                  flush=True)
        if done_r >= a.restarts and done_p >= a.probes and queries >= a.queries:
            break
        if time.monotonic() - t0 > a.timeout:
            print("soak: timed out", flush=True)
            ok = False
            break
        if vigil.poll() is not None:
            print("soak: vigil died", flush=True)
            ok = False
            break
    elapsed = time.monotonic() - t0
    end = quiet_figures()
    print(f"end:   {end}", flush=True)
    print(f"peak:  {peak}", flush=True)
    print(f"done:  restarts={done_r} probes={done_p} status_queries={queries} "
          f"in {elapsed:.0f}s", flush=True)

    client.request({"cmd": "shutdown"})
    try:
        code = vigil.wait(timeout=60)
    except subprocess.TimeoutExpired:
        vigil.kill()
        code = vigil.wait()
        ok = False
    counter.stop = True
    leftovers = []
    if scratch and os.path.isdir(scratch):
        for root, dirs, _ in os.walk(scratch, topdown=False):
            leftovers += [os.path.join(root, d) for d in dirs]
            for d in dirs:
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError:
                    pass
        try:
            os.rmdir(scratch)
        except OSError:
            pass
    left_procs = [p for p, _ in children_states(os.getpid()) if p != vigil.pid]
    print(f"after shutdown: exit={code} leftover_cgroups={leftovers} "
          f"orphans={left_procs}", flush=True)
    # Flat: the end figures within a small margin of the start (the loop's buffers and the
    # allocator settle; a leak over 10k restarts would be far larger).
    # Descriptors and pipes back to the start figure exactly; RSS may grow while bounded
    # buffers (events, probe history, captured logs) fill, so it is compared from mid-run.
    ref = mid or start
    flat = (end["fds"] <= start["fds"] and end["pipes"] <= start["pipes"]
            and end["rss_kib"] <= ref["rss_kib"] + 1024 and end["zombies"] == 0)
    if not flat:
        print("soak: FIGURES NOT FLAT", flush=True)
        ok = False
    if code != 0 or leftovers:
        ok = False
    print("soak: PASS" if ok else f"soak: FAIL (log in {work}/vigil.log)", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
