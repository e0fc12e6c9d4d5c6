#!/usr/bin/env bash
# What ACTORCC_LOG=info shows of a communicator's start, checked on a real run of the conformance
# program (procs 2): each rank's ready line, stamped, with its construction's parts (local, join,
# setup) adding up to its total, and the note of the communicator's first call with the time since
# its init returned. Then at ACTORCC_LOG=debug: the root's WELCOME line and each rank's "group
# formed" line, with their threads' time on a CPU and waiting for one (where the kernel keeps it),
# which together cannot exceed the step's own time, and each rank's descriptor table, grown at load.
set -u
prog=$1
log=$(ACTORCC_LOG=info "$prog" procs 2 2>&1)
rc=$?
fail=0
[ "$rc" = 0 ] || { echo "FAIL: procs 2 exited $rc"; fail=1; }
for r in 0 1; do
  ready=$(echo "$log" | grep -E "^\[actorcc INFO pid [0-9]+ [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\] rank $r/2 ready: backend cpu, " |
    head -1)
  if [ -z "$ready" ]; then
    echo "FAIL: no stamped ready line of rank $r"
    fail=1
  elif ! echo "$ready" | awk '{
      if (!match($0, /; in [0-9.]+ ms: local [0-9.]+, join [0-9.]+, setup [0-9.]+$/)) exit 1
      split(substr($0, RSTART), f, /[^0-9.]+/)  # f[2]: total, f[3..5]: the parts
      d = f[2] - f[3] - f[4] - f[5]; exit (d < -0.5 || d > 0.5) }'; then
    echo "FAIL: rank $r's ready line lacks its parts, or they do not add up: $ready"
    fail=1
  fi
  echo "$log" | grep -qE "ncclAllReduce: rank $r of 2: the communicator's first call, [0-9]+\.[0-9] ms after its init returned" ||
    { echo "FAIL: no first-call note of rank $r"; fail=1; }
done
[ "$fail" = 0 ] && echo "PASS: both ranks' ready lines and first-call notes" || echo "$log" | grep "^\[actorcc" | head -20

dlog=$(ACTORCC_LOG=debug "$prog" procs 2 2>&1)
[ $? = 0 ] || { echo "FAIL: procs 2 at debug exited non-zero"; fail=1; }
cpu="; this thread since then: [0-9]+\.[0-9]{2} ms on a CPU, [0-9]+\.[0-9]{2} ms waiting for one, [0-9]+ page faults \([0-9]+ major\)"
[ -r /proc/thread-self/schedstat ] || cpu=""
# X ms for the step, A ms on a CPU, B ms waiting: A + B <= X (the figures are read within the
# step's span; 0.02 ms for their rounding)
fits='{ if (!match($0, /[0-9.]+ ms (after|into)[^;]*; this thread since then: [0-9.]+ ms on a CPU, [0-9.]+ ms waiting/)) exit 0
       split(substr($0, RSTART), f, /[^0-9.]+/); exit (f[2] + f[3] > f[1] + 0.02) }'
check_line() {  # PATTERN WHAT
  local line
  line=$(echo "$dlog" | grep -E "$1$cpu\$" | head -1)
  if [ -z "$line" ]; then
    echo "FAIL: no debug line of $2"; fail=1
  elif ! echo "$line" | awk "$fits"; then
    echo "FAIL: $2: the thread's figures exceed the step's time: $line"; fail=1
  fi
}
check_line "actorcc root [^ ]+: all 2 ranks joined: WELCOME, [0-9.e-]+ ms after it began serving" "the root's WELCOME"
for r in 0 1; do
  check_line "actorcc rank $r: the group formed \(the root's WELCOME\) [0-9.e-]+ ms into the join" "rank $r's join"
done
# Each rank's process grew its descriptor table when the library loaded (common/fd_table.hpp),
# to 4096 slots or the soft limit on descriptors, so no socket of the join has to grow it.
want=$(ulimit -Sn)
[ "$want" = unlimited ] || [ "$want" -gt 4096 ] && want=4096
for r in 0 1; do
  line=$(echo "$dlog" | grep -E "actorcc rank $r: connected to the root at [^ ]+ in [0-9.e-]+ ms; the descriptor table: [0-9]+ slots" |
    head -1)
  slots=$(echo "$line" | sed -nE 's/.*the descriptor table: ([0-9]+) slots.*/\1/p')
  if [ -z "$slots" ] || [ "$slots" -lt "$want" ]; then
    echo "FAIL: rank $r's descriptor table is not at least $want slots: $line"; fail=1
  fi
done
with=""
[ -n "$cpu" ] && with=" with the CPU figures of their threads"
[ "$fail" = 0 ] && echo "PASS: the join's debug lines$with" ||
  echo "$dlog" | grep "WELCOME" | head -6
exit "$fail"
