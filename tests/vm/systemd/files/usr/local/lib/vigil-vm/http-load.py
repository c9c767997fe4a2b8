# The load of tests/vm/systemd section 6: GET /r1, /r2, … of http://127.0.0.1:PORT one after
# the other (a new connection each, 10 s timeout, 10 ms apart) until DIR/stop exists, then
# writes DIR/result:
#   requests N          how many were sent
#   first_after K       the first one sent once DIR/crashed existed (0: none)
#   failed F            how many did not get 200 "ok", then one line each: "n: why"
#
#   python3 http-load.py PORT DIR
import http.client
import os
import sys
import time

PORT = int(sys.argv[1])
DIR = sys.argv[2]

n = 0
first_after = 0
failed = []
while not os.path.exists(os.path.join(DIR, "stop")):
    if not first_after and os.path.exists(os.path.join(DIR, "crashed")):
        first_after = n + 1
    n += 1
    try:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        conn.request("GET", "/r%d" % n)
        answer = conn.getresponse()
        body = answer.read()
        conn.close()
        if answer.status != 200 or body != b"ok":
            failed.append("%d: %d %r" % (n, answer.status, body[:40]))
    except Exception as e:  # every failure is the verdict's, none ends the load
        failed.append("%d: %r" % (n, e))
    time.sleep(0.01)

tmp = os.path.join(DIR, "result.tmp")
with open(tmp, "w") as f:
    f.write("requests %d\nfirst_after %d\nfailed %d\n" % (n, first_after, len(failed)))
    for line in failed:
        f.write(line + "\n")
os.rename(tmp, os.path.join(DIR, "result"))
