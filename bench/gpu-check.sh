#!/usr/bin/env bash
# The CUDA backend's checks and figures on a GPU host, in one call (issue 6):
#   bench/gpu-check.sh [BUILD_DIR]        (default build/gpu; no Qt or OpenBLAS needed)
# 1. versions: driver, GPU, nvcc, NCCL;
# 2. configures and builds the runner and the plain tests with -DPIPESCOPE_BUILD_APP=OFF;
# 3. runs the kernel tests against the CPU kernels and the CPU-versus-CUDA backend equality test;
# 4. runs the CUPTI tracing test (a traced run read back: kernel rows, one gpu-lane row per op);
#    (step "sanitize") runs the kernel tests under compute-sanitizer: memcheck finds
#    out-of-bounds and misaligned accesses, cuBLAS's too, so a GEMM whose leading dimension or
#    transposition does not match its buffer shows there; racecheck finds shared-memory races
#    (the block reductions); $SANITIZE_TOOLS picks the tools (default "memcheck racecheck");
# 5. runs naive and vocab-2 with 4 stages on one GPU (every rank on device 0), at the small
#    presets' size and at h=1024, V=64k (gpu-4stage-*), traced with CUPTI, and prints the
#    iteration time, per-rank busy and GPU busy time and peak memory of each from their traces;
#    then the same runs with --cupti off, for the tracing overhead, and with asynchronous lanes
#    (--lane-sync event) against the default synchronize-per-op;
# 6. reports the runner's GEMM throughput per shape against a plain cuBLAS GEMM (--gemm-report);
# 7. runs vocab-2 as four processes (one rank each) on the GPU and merges their traces;
# 8. where Nsight Systems is installed, profiles vocab-2 under nsys and imports the export into
#    the run's trace (pipescope-trace import-nsys), to compare with step 5's CUPTI trace.
# Output goes to stdout; logs and traces to $GPU_CHECK_WORK (default /tmp/pipescope-gpu-check).
# When $OUT is set (the device tool's result folder, which brings back at most 8 files), the
# call leaves there its own output (gpu-check-STEPS.log) and its logs, summaries and small
# traces in one gpu-check-STEPS.tar.gz.
#
# What a bare GPU host lacks to build: SQLite's header and library and nlohmann/json's headers.
# Run bench/gpu-deps.sh here first; it puts them in .gpu-deps/ (ignored by git), and the device
# tool takes them along with carry=[".gpu-deps"]. NCCL comes from the toolkit, $NCCL_HOME, or the
# nvidia-nccl pip package of the host's python3.
#
# Each binary runs under a time limit (timeout(1): 1 to 4 minutes), so a hang costs its step and
# the steps after it still run. A call that is cut off (the device tool stops a command after 10
# minutes) keeps what it wrote to $OUT, but not the steps after it, so the steps can be run a few
# at a time, in calls made back to back (a machine left idle goes back, and a new one rebuilds):
#   bench/gpu-check.sh build/gpu versions,build,tests      then
#   bench/gpu-check.sh build/gpu runs,events               then
#   bench/gpu-check.sh build/gpu gemm,processes,nsys
# A step that needs the build makes it first when it is missing (the device machine goes back
# 30 s after a call, and a new one starts bare).
# Steps: versions, build, tests, sanitize, runs, events, gemm, processes, nsys (default: all of
# them).
# "events" compares with the traces "runs" wrote, so it runs after it, in one call.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build/gpu}
all_steps=versions,build,tests,sanitize,runs,events,gemm,processes,nsys
steps=${2:-$all_steps}
for s in ${steps//,/ }; do
    if [[ ",$all_steps," != *",$s,"* ]]; then
        echo "gpu-check: unknown step '$s' (steps: $all_steps)" >&2
        exit 2
    fi
done
out=${GPU_CHECK_WORK:-/tmp/pipescope-gpu-check}
mkdir -p "$out"
jobs=$(nproc 2>/dev/null || echo 4)
want() { [[ ",$steps," == *",$1,"* ]]; }
tag=${steps//,/-}
# Everything printed goes to the result folder too, and what the steps wrote is packed there at
# the end (the device tool brings back 8 files at most).
if [ -n "${OUT:-}" ]; then
    exec > >(tee "$OUT/gpu-check-$tag.log") 2>&1
    pack() {
        local tarball="$OUT/gpu-check-$tag.tar.gz"
        (cd "$out" && find . -maxdepth 1 -type f \( -name '*.log' -o -name '*.txt' -o -name '*.json' \
            -o \( -name '*.db' -size -4M \) \) -print0 | tar --null -czf "$tarball" -T -) || true
        # Over the tool's 16 MiB a file: without the traces.
        if [ "$(stat -c %s "$tarball" 2> /dev/null || echo 0)" -gt $((15 << 20)) ]; then
            (cd "$out" && find . -maxdepth 1 -type f \( -name '*.log' -o -name '*.txt' -o -name '*.json' \) \
                -print0 | tar --null -czf "$tarball" -T -) || true
        fi
    }
    trap pack EXIT
fi
needs_build=0
for s in tests sanitize runs events gemm processes nsys; do
    want "$s" && needs_build=1
done
if ! want build && [ $needs_build -eq 1 ] && [ ! -x "$build/bin/pipescope-run" ]; then
    echo "gpu-check: $build has no build (a fresh machine): building it first"
    steps="build,$steps"
fi
status=0
# Every binary runs under a time limit, so that a hang (a deadlock, a CUPTI flush that never
# returns) costs its step and not the whole call: the steps after it still run and report.
limit() {
    local seconds=$1
    shift
    timeout -k 10 "$seconds" "$@"
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "gpu-check: stopped after ${seconds} s: ${*:1:3}" >&2
    fi
    return $rc
}
# A test binary: its log in $out, the lines matching $2 shown; 77 (skipped) is fine when $3 says so.
run_test() {
    local name=$1 pattern=$2 skip_ok=${3:-no} seconds=${4:-240}
    limit "$seconds" "$build/bin/$name" > "$out/$name.log" 2>&1
    local rc=$?
    grep -E "$pattern" "$out/$name.log"
    echo "-- $name: exit $rc"
    if [ $rc -ne 0 ] && ! { [ "$skip_ok" = skip-ok ] && [ $rc -eq 77 ]; }; then
        status=1
    fi
}

# nvcc where CMake and the versions step look for it: an image may install the toolkit without
# putting its bin/ on PATH, and a configure that finds no CUDA compiler builds no CUDA target.
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi
# What a bare host lacks: SQLite and nlohmann/json from .gpu-deps (bench/gpu-deps.sh), NCCL
# from the pip package when the toolkit has none.
deps=()
if [ -d .gpu-deps ]; then
    deps+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps")
fi
# (`ls A B` fails when either is missing: the pip package would then be taken although the
# toolkit has NCCL.)
if [ -z "${NCCL_HOME:-}" ] && [ ! -f /usr/include/nccl.h ] && [ ! -f /usr/local/cuda/include/nccl.h ]; then
    pip_nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2> /dev/null || true)
    if [ -n "$pip_nccl" ] && [ -f "$pip_nccl/include/nccl.h" ]; then
        export NCCL_HOME=$pip_nccl
    fi
fi

if want versions; then
echo "== versions"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: not available"
nvcc --version | tail -1
echo "NCCL headers: ${NCCL_HOME:-the CUDA toolkit or /usr/include}"
grep -hE "#define NCCL_(MAJOR|MINOR|PATCH) " /usr/include/nccl.h /usr/local/cuda/include/nccl.h \
    ${NCCL_HOME:+"$NCCL_HOME/include/nccl.h"} 2>/dev/null | awk '{printf "%s=%s ", $2, $3} END {print ""}'
echo "$(g++ --version | head -1); $(cmake --version | head -1)"
echo ".gpu-deps: $([ -d .gpu-deps ] && echo "carried ($(ls .gpu-deps/lib | tr '\n' ' '))" || echo "not here")"
fi

if want build; then
echo "== build ($build)"
start=$(date +%s)
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPIPESCOPE_BUILD_APP=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" "${deps[@]}" > "$out/configure.log" 2>&1 ||
    { tail -n 30 "$out/configure.log"; exit 1; }
grep -E "^-- (CUDA|NCCL)|^ \* (CUDA|NCCL|CUPTI)|not found" "$out/configure.log" | head -20
# Without CUDA the configure succeeds but has none of the targets below: say so, not "no rule".
if ! grep -q "^-- CUDA " "$out/configure.log"; then
    echo "gpu-check: CMake found no CUDA compiler (nvcc) or toolkit: nothing to test here"
    exit 1
fi
cmake --build "$build" -j "$jobs" --target pipescope-run pipescope-trace tst_kernels_cuda tst_cuda_backend tst_gpu_trace tst_nccl_comm \
    > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
# Which libraries the runner loads (an LD_LIBRARY_PATH of the host can win over the RUNPATH).
ldd "$build/bin/pipescope-run" | grep -E 'cupti|cublas|cudart|nccl|sqlite' | sed 's/ (0x.*//'
fi

if want tests; then
echo "== kernels against the CPU kernels"
run_test tst_kernels_cuda "^(FAIL|SKIP|device|---)|checks" no 180
echo "== CUDA backend against the CPU backend"
run_test tst_cuda_backend "^(FAIL|SKIP)|cases" no 240
echo "== NCCL between GPUs (runs with two GPUs or more; skips with one)"
run_test tst_nccl_comm "." skip-ok 60
echo "== CUPTI tracing"
run_test tst_gpu_trace "." no 120
fi

if want sanitize; then
echo "== the kernel tests under compute-sanitizer (${SANITIZE_TOOLS:-memcheck racecheck})"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda/compute-sanitizer/compute-sanitizer 2> /dev/null | head -1)
if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer is not installed here: skipped"
else
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        limit 150 "$sanitizer" --tool "$tool" --error-exitcode 99 "$build/bin/tst_kernels_cuda" \
            > "$out/sanitize-$tool.log" 2>&1
        rc=$?
        # The summary, the first reports (each names the kernel and the access) and the test's
        # own failures, if any.
        grep -E "SUMMARY|^========= [A-Z]|^FAIL|checks, " "$out/sanitize-$tool.log" | head -n 25
        echo "-- $tool: exit $rc"
        if [ $rc -ne 0 ]; then
            status=1
        fi
    done
fi
fi

# One preset's run traced with CUPTI (stats of its trace) and untraced (for the overhead).
iteration_ms() {
    limit 60 "$build/bin/pipescope-trace" stats "$1" --json | grep -m1 '"iteration_time_ms"' | tr -dc '0-9.'
}
run_traced_and_not() {
    local name=$1 preset=$2 iterations=$3
    local db="$out/run-$name.db"
    limit 150 "$build/bin/pipescope-run" "$preset" --backend cuda --out "$db" --force \
        --iterations "$iterations" --summary-json "$out/run-$name.json" > "$out/run-$name.log" 2>&1
    local rc=$?
    echo "-- $name (exit $rc)"
    if [ $rc -ne 0 ]; then
        tail -n 5 "$out/run-$name.log"
        status=1
        return
    fi
    grep -E "^(gpu trace|communication)" "$out/run-$name.log"
    "$build/bin/pipescope-trace" stats "$db" | tee "$out/stats-$name.txt"
    "$build/bin/pipescope-trace" ops "$db" > "$out/ops-$name.txt"
    "$build/bin/pipescope-trace" kernels "$db" --top 10 | tee "$out/kernels-$name.txt"
    limit 150 "$build/bin/pipescope-run" "$preset" --backend cuda --cupti off --out "$out/run-$name-nocupti.db" \
        --force --iterations "$iterations" > "$out/run-$name-nocupti.log" 2>&1 || { status=1; return; }
    local on off
    on=$(iteration_ms "$db")
    off=$(iteration_ms "$out/run-$name-nocupti.db")
    echo "-- $name: iteration time with CUPTI $on ms, without $off ms (mean of the measured iterations)"
    grep -E "^iteration" "$out/run-$name-nocupti.log" | tr '\n' ' ' | sed 's/iteration *//g'; echo
}
if want runs; then
echo "== naive and vocab-2, 4 stages on one GPU: the small presets (launch-bound)"
for method in naive vocab-2; do
    run_traced_and_not "4stage-$method" "resources/presets/small-4stage-$method.json" 20
done
echo "== naive and vocab-2, 4 stages on one GPU: h=1024, V=64k (gpu-4stage-*)"
for method in naive vocab-2; do
    run_traced_and_not "gpu-4stage-$method" "resources/presets/gpu-4stage-$method.json" 10
done
fi
# The same runs with asynchronous lanes: host spans are issue times there, so the figures to
# compare are the iteration time and the GPU busy time of the CUPTI trace (gpu busy ms).
run_events() {
    local name=$1 preset=$2 iterations=$3
    local db="$out/run-$name-events.db"
    if ! limit 150 "$build/bin/pipescope-run" "$preset" --backend cuda --lane-sync event --out "$db" --force \
        --iterations "$iterations" > "$out/run-$name-events.log" 2>&1; then
        echo "-- $name with --lane-sync event: failed"
        tail -n 5 "$out/run-$name-events.log"
        status=1
        return
    fi
    echo "-- $name: iteration time with events $(iteration_ms "$db") ms, synchronized per op $(iteration_ms "$out/run-$name.db") ms"
    echo "   last losses: events $(grep -E '^iteration' "$out/run-$name-events.log" | tail -1), per op $(grep -E '^iteration' "$out/run-$name.log" | tail -1)"
    "$build/bin/pipescope-trace" stats "$db" | tee "$out/stats-$name-events.txt"
}
if want events; then
echo "== asynchronous lanes (--lane-sync event) against a stream synchronize per op"
for size in 4stage gpu-4stage; do
    for method in naive vocab-2; do
        preset="resources/presets/small-4stage-$method.json"
        [ "$size" = gpu-4stage ] && preset="resources/presets/gpu-4stage-$method.json"
        run_events "$size-$method" "$preset" "$([ "$size" = gpu-4stage ] && echo 10 || echo 20)"
    done
done
fi

if want gemm; then
echo "== GEMM throughput of the runner against a plain cuBLAS GEMM of the same shape"
for method in naive vocab-2; do
    limit 150 "$build/bin/pipescope-run" "resources/presets/gpu-4stage-$method.json" --backend cuda \
        --cupti off --gemm-report --iterations 4 --out "$out/gemm-$method.db" --force \
        > "$out/gemm-$method.log" 2>&1 || { status=1; tail -n 5 "$out/gemm-$method.log"; }
    echo "-- gpu-4stage-$method"
    sed -n '/^GEMMs inside/,$p' "$out/gemm-$method.log"
done
# The same model on one rank: its GEMMs have the GPU to themselves.
limit 150 "$build/bin/pipescope-run" resources/presets/gpu-4stage-naive.json --set parallel.pipeline=1 \
    --backend cuda --cupti off --gemm-report --iterations 4 --out "$out/gemm-1rank.db" --force \
    > "$out/gemm-1rank.log" 2>&1 || { status=1; tail -n 5 "$out/gemm-1rank.log"; }
echo "-- gpu-4stage-naive on one rank (pipeline 1)"
grep -E "^iteration +3 \(4/4\)" "$out/gemm-1rank.log"
sed -n '/^GEMMs inside/,$p' "$out/gemm-1rank.log"
fi

if want processes; then
echo "== one process per rank: vocab-2, 4 processes sharing the GPU (socket transport), merged"
for r in 0 1 2 3; do
    limit 180 "$build/bin/pipescope-run" resources/presets/small-4stage-vocab-2.json --backend cuda \
        --out "$out/mp.db" --force --iterations 10 --rank $r --world-size 4 \
        --rendezvous 127.0.0.1:29517 > "$out/mp-rank$r.log" 2>&1 &
done
wait
if limit 60 "$build/bin/pipescope-trace" merge "$out"/mp-rank[0-3].db -o "$out/mp.db" --force; then
    "$build/bin/pipescope-trace" stats "$out/mp.db" | tee "$out/stats-mp.txt"
else
    tail -n 3 "$out"/mp-rank*.log
    status=1
fi
fi

if want nsys; then
echo "== Nsight Systems: vocab-2 under nsys, its export imported into the run's trace"
if command -v nsys > /dev/null; then
    nsys --version
    if limit 240 nsys profile -t cuda,nvtx -o "$out/nsys-vocab-2" --force-overwrite true \
           "$build/bin/pipescope-run" resources/presets/small-4stage-vocab-2.json \
           --backend cuda --cupti off --iterations 10 --out "$out/nsys-vocab-2.db" --force \
           > "$out/nsys.log" 2>&1 &&
       limit 120 nsys export --type sqlite --force-overwrite true -o "$out/nsys-vocab-2.sqlite" \
           "$out/nsys-vocab-2.nsys-rep" >> "$out/nsys.log" 2>&1 &&
       "$build/bin/pipescope-trace" import-nsys "$out/nsys-vocab-2.db" \
           "$out/nsys-vocab-2.sqlite" -o "$out/nsys-vocab-2-gpu.db" --force; then
        "$build/bin/pipescope-trace" stats "$out/nsys-vocab-2-gpu.db" | tee "$out/stats-nsys.txt"
        "$build/bin/pipescope-trace" kernels "$out/nsys-vocab-2-gpu.db" --top 10 |
            tee "$out/kernels-nsys.txt"
    else
        tail -n 5 "$out/nsys.log"
        status=1
    fi
else
    echo "nsys is not installed here: skipped"
fi
fi
echo "== done (status $status); logs and traces in $out${OUT:+, packed in \$OUT/gpu-check-$tag.tar.gz}"
exit $status
