#!/usr/bin/env bash
# The TCP transport between real processes (driven through tcp_worker):
#   processes: 3 ranks on loopback check every byte of odd and large exchanges; then a rank is
#              SIGKILLed mid-traffic and both survivors must fail within the timeout naming it
#              (each rank passes its failure's cause on through the bootstrap abort).
#   netns:     two network namespaces joined by a veth pair, so the "nodes" have different
#              addresses: 2 ranks in each check their exchanges across the link; then one rank
#              in each, the link is cut (ip link set down) and both must fail within the
#              timeout naming the other. Given mp_worker too, the whole CPU backend: 2 x 2 ranks
#              on the hierarchical CPU backend (virtual nodes a and b, shared memory inside each,
#              TCP rails across) loop all_reduce; the link is cut mid-call and every rank must
#              fail within the timeout naming a rank on the other side, and exit, leaving nothing
#              in /dev/shm. Needs root and ip netns; exits 77 (skipped) without.
# Everything it creates (namespaces, veth, processes, temp files) is removed on exit.
set -uo pipefail
mode=${1:?processes|netns}
worker=${2:?path of tcp_worker}
mp_worker=${3:-}  # netns: also cut the link under the CPU backend
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

# start NAME NETNS(or -) ARGS...: one worker in the background, output in $tmp/NAME.{out,err};
# $program (default tcp_worker) is the worker run, $node_id its ACTORCC_NODE_ID if set.
start() {
  local name=$1 ns=$2
  shift 2
  local cmd=("${program:-$worker}" "$@")
  [ -n "${node_id:-}" ] && cmd=(env ACTORCC_NODE_ID="$node_id" "${cmd[@]}")
  if [ "$ns" = - ]; then
    "${cmd[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  else
    ip netns exec "$ns" "${cmd[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" &
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

# wait_ready NAME...: each named worker printed $ready_word (default "ready") within 30 s.
wait_ready() {
  local end=$((SECONDS + 30))
  for name in "$@"; do
    until grep -q "${ready_word:-ready}" "$tmp/$name.out" 2>/dev/null; do
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
  # A survivor may lose the other survivor first (that one exits after failing), but the
  # first cause reaches every rank through the bootstrap's abort (tcp_worker waits for the
  # root's news before it reports), so every survivor names the killed rank.
  for k in k0 k1; do expect_named $k 2; done
  echo "kill: every survivor failed naming the killed rank 2 within $((SECONDS - t0)) s"
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
  [ -n "$mp_worker" ] || { echo PASS; exit 0; }

  # The whole CPU backend across the link: ranks 0, 1 on node a, ranks 2, 3 on node b; each
  # rail (0-2, 1-3) crosses the veth. A cut link closes nothing, so what ends the calls is the
  # rail's call timeout on each side, then the abort to the node peer through shared memory.
  ip -n "$a" link set "$va" up || fail "link up again"
  port=29502
  program=$mp_worker ready_word=LOOPING
  for r in 0 1 2 3; do
    ns=$a node_id=a
    [ $r -ge 2 ] && ns=$b node_id=b
    start "h$r" "$ns" --id - --rank $r --world 4 --mode link_cut --port $port --host 10.231.0.1 \
      --timeout-ms $op_timeout_ms --join-timeout-ms 30000
  done
  node_id=
  wait_ready h0 h1 h2 h3
  sleep 0.3
  ip -n "$a" link set "$va" down || fail "link down"
  t0=$SECONDS
  # every rank: the rail timeout, the abort, then the teardown (its goodbye to an unreachable
  # root is bounded too); exit 0 means the error named a rank of the other node
  wait_exit $((op_timeout_ms / 1000 + 8)) 0 h0 h1 h2 h3
  for h in h0 h1 h2 h3; do echo "  $h: $(grep ' got ' "$tmp/$h.err")"; done
  # a segment's name ends in its creator's pid (other groups on this host may have their own)
  left=$(ls /dev/shm | grep -E -- "^actorcc-.*-p($pid_h0|$pid_h1|$pid_h2|$pid_h3)\$")
  [ -z "$left" ] || fail "segments left in /dev/shm: $left"
  echo "CPU backend link cut: all 4 ranks failed naming the other side and exited within $((SECONDS - t0)) s"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo PASS
