#!/usr/bin/env bash
# The TCP transport between real processes (driven through tcp_worker):
#   processes: 3 ranks on loopback check every byte of odd and large exchanges; then a rank is
#              SIGKILLed mid-traffic and both survivors must fail within the timeout naming it.
#   netns:     two network namespaces joined by a veth pair, so the "nodes" have different
#              addresses: 2 ranks in each check their exchanges across the link; then one rank
#              in each, the link is cut (ip link set down) and both must fail within the
#              timeout naming the other. Needs root and ip netns; exits 77 (skipped) without.
# Everything it creates (namespaces, veth, processes, temp files) is removed on exit.
set -uo pipefail
mode=${1:?processes|netns}
worker=${2:?path of tcp_worker}
tmp=$(mktemp -d /tmp/actorcc-tcp-XXXXXX)
pids=()
namespaces=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

seed=$RANDOM$RANDOM
# The namespaces' ranks meet at a non-loopback address through from_address, which (like any
# group reachable from other hosts) needs a secret shared by every rank.
ACTORCC_BOOTSTRAP_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export ACTORCC_BOOTSTRAP_SECRET
op_timeout_ms=2000

# start NAME NETNS(or -) ARGS...: one worker in the background, output in $tmp/NAME.{out,err}
start() {
  local name=$1 ns=$2
  shift 2
  if [ "$ns" = - ]; then
    "$worker" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  else
    ip netns exec "$ns" "$worker" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  fi
  pids+=($!)
  eval "pid_$name=$!"
}

# wait_exit SECONDS CODE NAME...: each named worker exits with CODE within SECONDS.
wait_exit() {
  local secs=$1 code=$2
  shift 2
  local end=$((SECONDS + secs))
  for name in "$@"; do
    local pid
    eval "pid=\$pid_$name"
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
    kill -0 "$pid" 2>/dev/null && fail "$name still running after ${secs} s"
    wait "$pid"
    local rc=$?
    [ "$rc" = "$code" ] || fail "$name exited $rc, expected $code"
  done
}

wait_ready() {
  local end=$((SECONDS + 30))
  for name in "$@"; do
    until grep -q ready "$tmp/$name.out" 2>/dev/null; do
      [ $SECONDS -lt $end ] || fail "$name not ready within 30 s"
      sleep 0.05
    done
  done
}

# expect_named NAME RANK: NAME's error names RANK and says what happened to it.
expect_named() {
  grep -q "rank $2" "$tmp/$1.err" || fail "$1's error does not name rank $2"
  echo "  $1: $(cat "$tmp/$1.err")"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

case "$mode" in
processes)
  port=$(free_port)
  for r in 0 1 2; do start "c$r" - check $r 3 127.0.0.1 "$port" "$seed" 20000; done
  wait_exit 60 0 c0 c1 c2
  echo "check: 3 ranks exchanged every size intact"

  port=$(free_port)
  for r in 0 1 2; do start "k$r" - until-error $r 3 127.0.0.1 "$port" "$seed" $op_timeout_ms; done
  wait_ready k0 k1 k2
  sleep 0.3
  kill -9 "$pid_k2"
  t0=$SECONDS
  wait_exit $((op_timeout_ms / 1000 + 5)) 3 k0 k1
  # The transport names the peer whose connection broke. A survivor may lose the other
  # survivor first (that one exits at once after losing rank 2), so each names a lost peer and
  # at least one names rank 2; telling every rank the first cause is the bootstrap's abort, a
  # layer up (Failure.KilledRankOnAnotherNodeIsNamedByAll checks it through the CPU backend).
  named2=0
  for k in k0 k1; do
    # the error after its "rank R:" prefix names one of R's peers
    others=$( [ $k = k0 ] && echo "[12]" || echo "[02]" )
    sed 's/^error: [^:]*: rank [0-9]*: //' "$tmp/$k.err" | grep -Eq "rank $others" ||
      fail "$k's error names no lost peer"
    grep -q "rank 2" "$tmp/$k.err" && named2=1
    echo "  $k: $(cat "$tmp/$k.err")"
  done
  [ $named2 = 1 ] || fail "no survivor names the killed rank 2"
  echo "kill: survivors failed naming a lost peer (rank 2 at least once) within $((SECONDS - t0)) s"
  ;;
netns)
  if [ "$(id -u)" != 0 ] || ! ip netns add "actorcc-probe-$$" 2>/dev/null; then
    echo "SKIP: network namespaces need root and ip netns"
    exit 77
  fi
  ip netns del "actorcc-probe-$$"
  a="actorcc-a-$$" b="actorcc-b-$$" va="acA$$" vb="acB$$"
  namespaces=("$a" "$b")
  ip netns add "$a" && ip netns add "$b" || fail "ip netns add"
  ip link add "${va:0:15}" type veth peer name "${vb:0:15}" || { echo "SKIP: veth not permitted"; exit 77; }
  va=${va:0:15} vb=${vb:0:15}
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" || fail "moving veth ends"
  ip -n "$a" addr add 10.231.0.1/24 dev "$va" && ip -n "$b" addr add 10.231.0.2/24 dev "$vb" || fail "addresses"
  for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
  ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up || fail "link up"

  # 2 nodes x 2 ranks, placed alternately: ranks 0 and 2 on node a, 1 and 3 on node b.
  port=29500
  start c0 "$a" check 0 4 10.231.0.1 $port "$seed" 20000
  start c1 "$b" check 1 4 10.231.0.1 $port "$seed" 20000
  start c2 "$a" check 2 4 10.231.0.1 $port "$seed" 20000
  start c3 "$b" check 3 4 10.231.0.1 $port "$seed" 20000
  wait_exit 60 0 c0 c1 c2 c3
  echo "check: 2 namespaces x 2 ranks exchanged every size intact"

  port=29501
  start n0 "$a" until-error 0 2 10.231.0.1 $port "$seed" $op_timeout_ms
  start n1 "$b" until-error 1 2 10.231.0.1 $port "$seed" $op_timeout_ms
  wait_ready n0 n1
  sleep 0.3
  ip -n "$a" link set "$va" down || fail "link down"
  t0=$SECONDS
  wait_exit $((op_timeout_ms / 1000 + 5)) 3 n0 n1
  expect_named n0 1
  expect_named n1 0
  echo "link cut: both sides failed naming the other within $((SECONDS - t0)) s"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo PASS
