#!/usr/bin/env bash
# Two "hosts" on one machine, for the runner's multi-node path (issue 8) where no second machine
# exists: two network and UTS namespaces (hostnames node0 and node1) joined by a veth pair, one
# process in each, started with torchrun's variables as on a two-node job. Needs root and
# iproute2 (exit 77 without them); the latency part needs tc's netem and is skipped without it.
#   bench/two-hosts.sh [BUILD_DIR]   (default build/ci; CPU backend)
# 1. the 2-stage vocab-2 preset as one process and as two nodes: losses side by side, the merged
#    trace's clock offsets, drift and causality check;
# 2. the same with 2 ms of latency added each way (netem): offsets and round trips, iteration time;
# 3. node1's process killed mid-run: how long node0 takes to stop, and what it says;
# 4. node1 cut off mid-run (its link down, its process still running): the same;
# 5. two processes per node, one on node1 killed: its trace is marked failed by the one left
#    there, and rank 0 says so.
# Output goes to stdout and to $OUT when set, else /tmp/pipescope-two-hosts.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build/ci}
out=${OUT:-/tmp/pipescope-two-hosts}
run="$build/bin/pipescope-run"
trace="$build/bin/pipescope-trace"
preset=resources/presets/small-2stage-vocab-2.json
mkdir -p "$out"

if [ "$(id -u)" -ne 0 ] || ! command -v ip > /dev/null; then
    echo "SKIP: needs root and ip (network namespaces)"
    exit 77
fi
[ -x "$run" ] && [ -x "$trace" ] || { echo "build $build first (pipescope-run, pipescope-trace)"; exit 1; }

a=ps2h-$$-a b=ps2h-$$-b va=ps2ha$$ vb=ps2hb$$
ip_a=10.231.0.1 ip_b=10.231.0.2
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
    ip netns del "$a" 2> /dev/null
    ip netns del "$b" 2> /dev/null
}
trap cleanup EXIT
if ! ip netns add "$a" 2> "$out/netns.err" || ! ip netns add "$b" 2>> "$out/netns.err"; then
    echo "SKIP: cannot make network namespaces here: $(head -1 "$out/netns.err")"
    exit 77
fi
if ! ip netns exec "$a" unshare -u true 2> "$out/netns.err"; then
    echo "SKIP: cannot enter a network namespace with its own hostname here: $(head -1 "$out/netns.err")"
    exit 77
fi
if ! ip link add "$va" type veth peer name "$vb" 2> "$out/netns.err"; then
    echo "SKIP: cannot make a veth pair here: $(head -1 "$out/netns.err")"
    exit 77
fi
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add $ip_a/24 dev "$va"
ip -n "$b" addr add $ip_b/24 dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up

port=$((29600 + $$ % 200))
# node RANK NAME LOG ARGS...: one process of the two-node job, in the background (its pid last
# in $pids: ip netns exec, unshare and sh all exec into pipescope-run). $per_node processes per
# node (1 unless set), ranks in blocks as torchrun numbers them: node0 has the first ones.
per_node=1
node() {
    local rank=$1 name=$2 log=$3
    shift 3
    local idx=$((rank / per_node)) ns=$a
    [ "$idx" = 1 ] && ns=$b
    ip netns exec "$ns" unshare -u sh -c "hostname node$idx; exec env RANK=$rank \
        WORLD_SIZE=$((2 * per_node)) LOCAL_RANK=$((rank % per_node)) LOCAL_WORLD_SIZE=$per_node \
        MASTER_ADDR=$ip_a MASTER_PORT=$port \"\$@\"" sh \
        "$run" "${preset_of:-$preset}" --backend cpu --out "$out/$name.db" --force "$@" > "$log" 2>&1 &
    pids+=($!)
}
# The losses a log printed, one per iteration ("-" where another process computes them).
losses() { grep -E '^iteration' "$1" | awk '{for (i = 1; i < NF; i++) if ($i == "loss") print $(i + 1)}' | tr '\n' ' '; }
now_ms() { date +%s%3N; }
# until_iteration LOG: waits (at most $TWO_HOSTS_WAIT_S, default 20 s; a sanitizer build's
# iterations take seconds each) until LOG shows the sixth iteration, so that a stop lands mid-run;
# says so, and fails the script, if it never does.
until_iteration() {
    local _ wait_s=${TWO_HOSTS_WAIT_S:-20}
    for _ in $(seq $((wait_s * 10))); do
        grep -qE '^iteration +[0-9]+ \(6/' "$1" 2> /dev/null && return 0
        sleep 0.1
    done
    echo "FAIL: $1 shows no sixth iteration after $wait_s s; it ends:"
    tail -n 5 "$1" | sed 's/^/    /'
    status=1
    return 1
}

status=0
echo "== two nodes against one process (20 iterations)"
"$run" "$preset" --backend cpu --iterations 20 --out "$out/one.db" --force > "$out/one.log" 2>&1 || status=1
node 0 two "$out/two-node0.log" --iterations 20
node 1 two "$out/two-node1.log" --iterations 20
wait "${pids[@]}" || status=1
pids=()
echo "one process:      $(losses "$out/one.log")"
echo "two nodes, node0: $(losses "$out/two-node0.log")"
echo "two nodes, node1: $(losses "$out/two-node1.log")"
# vocab-2's loss comes from the rank that holds the last stage: node1.
[ "$(losses "$out/one.log")" = "$(losses "$out/two-node1.log")" ] || { echo "FAIL: the losses differ"; status=1; }
grep -hE "^rank [01] of" "$out"/two-node*.log
"$trace" merge "$out/two-rank0.db" "$out/two-rank1.db" -o "$out/two.db" --force 2>&1 | tee "$out/merge.txt" || status=1
grep -q ", 0 violations" "$out/merge.txt" || { echo "FAIL: causality violations, or no check"; status=1; }
"$trace" stats "$out/two.db" | tee "$out/stats-two.txt"

echo "== the same with 2 ms of latency each way"
if ip netns exec "$a" tc qdisc add dev "$va" root netem delay 2ms 2> "$out/netem.err" &&
    ip netns exec "$b" tc qdisc add dev "$vb" root netem delay 2ms 2>> "$out/netem.err"; then
    node 0 slow "$out/slow-node0.log" --iterations 20
    node 1 slow "$out/slow-node1.log" --iterations 20
    wait "${pids[@]}" || status=1
    pids=()
    echo "two nodes, 2 ms apart: $(losses "$out/slow-node0.log")"
    "$trace" merge "$out/slow-rank0.db" "$out/slow-rank1.db" -o "$out/slow.db" --force 2>&1 | tee "$out/merge-slow.txt" || status=1
    "$trace" stats "$out/slow.db" | tee "$out/stats-slow.txt"
    ip netns exec "$a" tc qdisc del dev "$va" root
    ip netns exec "$b" tc qdisc del dev "$vb" root
else
    echo "skipped: this kernel has no netem ($(head -1 "$out/netem.err"))"
fi

# stop_test NAME HOW LIMIT_MS EXPECTED: node1 stops answering mid-run (HOW kills it or cuts it
# off); prints how long node0 took to stop after that, its exit code and its message, which must
# come within LIMIT_MS, with exit 4 and EXPECTED in the message.
stop_test() {
    local name=$1 how=$2 limit=$3 expected=$4
    node 0 "$name" "$out/$name-node0.log" --iterations 100000
    local p0=${pids[-1]}
    node 1 "$name" "$out/$name-node1.log" --iterations 100000
    local p1=${pids[-1]}
    if ! until_iteration "$out/$name-node0.log"; then
        # A run that never got going: node0 would wait out its rendezvous (minutes) for a node1
        # that is not coming, and the test would end at CTest's timeout saying nothing.
        echo "    node1's log ends:"
        tail -n 5 "$out/$name-node1.log" | sed 's/^/    /'
        kill -9 "$p0" "$p1" 2> /dev/null
        wait "$p0" "$p1" 2> /dev/null
        pids=()
        return
    fi
    local t0
    t0=$(now_ms)
    if [ "$how" = kill ]; then
        kill -9 "$p1"
    else
        ip -n "$b" link set "$vb" down  # both ends lose their carrier; nothing says goodbye
    fi
    wait "$p0" 2> /dev/null  # (and no "Killed" line for node1)
    local rc=$? t1
    t1=$(now_ms)
    echo "-- node1 $( [ "$how" = kill ] && echo killed || echo cut off ): node0 stopped after $(( t1 - t0 )) ms, exit $rc"
    grep -m1 -E "is gone|failed" "$out/$name-node0.log"
    if [ "$rc" -ne 4 ] || [ $(( t1 - t0 )) -gt "$limit" ] || ! grep -q "$expected" "$out/$name-node0.log"; then
        echo "FAIL: expected exit 4 within $limit ms saying '$expected'"
        status=1
    fi
    "$trace" stats "$out/$name-rank0.db" > "$out/stats-$name.txt" 2>&1
    grep -m1 -iE "status|failed" "$out/stats-$name.txt"
    kill -9 "$p1" 2> /dev/null
    wait "$p1" 2> /dev/null
    pids=()
    [ "$how" = kill ] || ip -n "$b" link set "$vb" up
}
echo "== a node that dies, and a node that vanishes"
stop_test killed kill 10000 "rank 1 is gone: its process ended"
stop_test cut cut 60000 "rank 1 is gone: its host stopped answering"

# The trace of a rank that died on node1 is marked failed by the rank still up there (rank 0,
# on node0, cannot tell whether that process has ended: if it reads the file before rank 2 has
# marked it, it says who will).
echo "== two processes per node; rank 3 (node1) killed"
per_node=2 preset_of=resources/presets/small-4stage-vocab-2.json
for r in 0 1 2 3; do node $r four "$out/four-rank$r.log" --iterations 100000; done
# (A run that never got going is stopped whole: its ranks would wait out their rendezvous.)
until_iteration "$out/four-rank0.log" || kill -9 "${pids[@]}" 2> /dev/null
kill -9 "${pids[3]}"
for i in 0 1 2; do wait "${pids[$i]}" 2> /dev/null; done
wait "${pids[3]}" 2> /dev/null
pids=()
grep -h "rank 3's trace" "$out"/four-rank[012].log
"$trace" stats "$out/four-rank3.db" > "$out/stats-four-rank3.txt" 2>&1
grep -m1 -iE "status" "$out/stats-four-rank3.txt"
if ! grep -q "marked rank 3's trace .* failed" "$out/four-rank2.log" ||
    grep -q "marked rank 3" "$out/four-rank0.log" "$out/four-rank1.log" ||
    ! grep -qi "status.*failed" "$out/stats-four-rank3.txt"; then
    echo "FAIL: rank 2, on rank 3's node, should have marked its trace failed, and only rank 2"
    status=1
fi
echo "== done (status $status); logs and traces in $out"
exit $status
