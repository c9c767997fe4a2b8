#!/bin/sh
SCENARIO=orphans
. /usr/local/lib/vmcheck.sh
c=pods.name=orphans.containers.name=maker
# The maker execs sleep once all 100 orphans exist; each orphan exits 0.2 s after its birth.
wait_until 60 "the maker to finish (sleep 1000 running)" running /bin/sleep 1000
wait_until 30 "every orphan to exit" gone /usr/local/bin/vmh orphans 100
no_zombies() { [ "$(vmh zombies)" = 0 ]; }
wait_until 10 "no zombie (PID 1 reaps orphans)" no_zombies
expect_json $c.restart_count 0
expect_json $c.state.running.started_at '!='
pass
