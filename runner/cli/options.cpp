#include "options.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <string_view>
#include <unistd.h>
#include <utility>

#include <pipescope/schedule/config_parse.h>

namespace pipescope::cli {

namespace {

// A whole number written out in full ("3", not "3x" or "").
bool parseInt(const std::string& text, int* out) {
    try {
        std::size_t used = 0;
        const int n = std::stoi(text, &used);
        if (used != text.size()) {
            return false;
        }
        *out = n;
        return true;
    } catch (...) {
        return false;
    }
}

// Why a report file (not the trace, whose writer says for itself) cannot be written at `path`,
// checked before a sweep or a run spends its time: empty when it can, as far as this process
// can tell.
std::string unwritable(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path p(path);
    if (fs::is_directory(p, ec)) {
        return "it is a folder";
    }
    const bool exists = fs::exists(p, ec);
    fs::path folder = p.parent_path();
    if (folder.empty()) {
        folder = ".";
    }
    if (!exists && !fs::is_directory(folder, ec)) {
        return "its folder " + folder.string() + " does not exist";
    }
    const std::string target = exists ? path : folder.string();
    if (::access(target.c_str(), W_OK) != 0) {
        return (exists ? "" : "its folder " + folder.string() + ": ") +
               std::string(std::strerror(errno));
    }
    return {};
}

// Whether two paths name one file, whether it exists yet or not ("./a.json" and "a.json", a
// link and its target).
bool sameTarget(const std::string& a, const std::string& b) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::equivalent(a, b, ec) && !ec) {
        return true;  // also two hard links of one file
    }
    // Absolute first: a relative name that does not exist yet would stay relative.
    std::error_code ec_a;
    std::error_code ec_b;
    const auto ca = fs::weakly_canonical(fs::absolute(a, ec_a), ec_a);
    const auto cb = fs::weakly_canonical(fs::absolute(b, ec_b), ec_b);
    return ec_a || ec_b ? a == b : ca == cb;
}

// Every option parseOptions takes, for the "did you mean" of an unknown one.
const std::vector<std::string_view> kOptionNames = {
    "--help",       "--version",      "--backend",       "--out",        "--force",
    "--iterations", "--summary-json", "--progress",      "--set",        "--sweep",
    "--sweep-csv",  "--compare",      "--save-schedule", "--schedule",   "--print-schedule",
    "--timeout",    "--gemm-report",  "--rank",          "--world-size", "--rendezvous",
    "--transport",  "--nccl",         "--lane-sync",     "--cupti",      "--list-devices",
    "--json"};

}  // namespace

std::string derivedOutputClash(const Options& o, const std::string& what, const std::string& path) {
    for (const auto& [name, other] : std::initializer_list<std::pair<const char*, std::string>>{
             {"the config file", o.config_path},
             {"the --schedule file", o.load_schedule},
             {"the --save-schedule file", o.save_schedule}}) {
        if (!other.empty() && other != "-" && sameTarget(path, other)) {
            return what + " " + path + " is " + name + "; refusing to overwrite it";
        }
    }
    return {};
}

// The files of one process of a multi-process run are named after the ones given
// (OUT-rankR.db, PATH-rankR.json), so one can be the config or the schedule file although the
// names given are not: the refusal, else empty.
std::string rankOutputClash(const Options& o, int rank, const std::string& trace,
                            const std::string& summary) {
    const std::string whose = "rank " + std::to_string(rank) + "'s ";
    std::string clash = derivedOutputClash(o, "--out: " + whose + "trace", trace);
    if (clash.empty() && !summary.empty() && summary != "-") {
        clash = derivedOutputClash(o, "--summary-json: " + whose + "summary", summary);
    }
    return clash;
}

const char* usage() {
    return R"(usage: pipescope-run CONFIG.json [options]
       pipescope-run --list-devices [--json]

Runs a pipeline-parallel training config on a backend and writes its trace. Options come in
any order and take their value as --opt VALUE or --opt=VALUE.

  --backend sim|cpu|cuda   executor (default sim: the virtual-clock simulator)
  --out RUN.db             trace file to write (optional for sim)
  --force                  replace RUN.db if it exists
  --iterations N           iterations to run (default: the config's run.iterations)
  --summary-json PATH|-    write the run summary as JSON (- for stdout)
  --progress jsonl         JSON-lines progress events on stdout (for the app)
  --set KEY=VALUE          override a config key, e.g. --set model.vocab=256000 (repeatable)
  --sweep KEY=V1,V2,...    simulate every combination of the listed values (repeatable, sim)
  --sweep-csv PATH|-       write the sweep table as CSV
  --compare                run every variant of the config's "compare" list and compare them
  --save-schedule PATH|-   write the generated schedule as JSON (for hand editing)
  --schedule PATH          run this schedule file instead of generating one
  --print-schedule         print each rank's op list
  --timeout SECONDS        cpu/cuda: how long a rank may wait for another before the
                           run fails (default 600; deadlocks are reported at once)
  --gemm-report            GEMM throughput in the run next to a plain library GEMM of the
                           same shape (cpu: OpenBLAS sgemm; cuda: cuBLAS, timed with events)
  --cupti on|off           cuda: trace kernels, copies and runtime calls with CUPTI into the
                           trace's Nsight tables and gpu lane (default on)
  --lane-sync op|event     cuda: op (default): each op waits for its stream, so host spans are
                           execution times; event: ops are only issued and the lanes wait for
                           each other through CUDA events (the gpu lane of the CUPTI trace is
                           the execution; the event path has not run on a GPU yet)
  --nccl on|off            cuda: NCCL between the ranks' GPUs, in this process or one rank per
                           process (default off: staged through host memory; the NCCL path
                           has not run yet)
  --rank R --world-size N  cpu/cuda: this process runs rank R of N (one rank per process; by
                           default taken from torchrun, mpirun, srun or PMI); each process
                           writes OUT-rankR.db (merge them with pipescope-trace merge)
  --rendezvous HOST:PORT   where rank 0 listens for the others (default: MASTER_ADDR and
                           MASTER_PORT + 1, $PIPESCOPE_RENDEZVOUS, or 127.0.0.1:29517)
  --transport auto|socket|mpi
                           how the processes of a multi-process run talk: TCP through rank
                           0 (auto, socket: any launcher) or MPI (under mpirun or srun, in
                           builds with MPI)
  --list-devices           list the backends and whether this build can run them
  --json                   with --list-devices: print the list as JSON
  --help, -h, --version

Exit codes: 0 success, 2 bad config or arguments, 3 backend not available here,
4 run failed, 130 cancelled.
)";
}

ParsedOptions parseOptions(const std::vector<std::string>& args) {
    ParsedOptions out;
    Options o;
    auto fail = [&](const std::string& why) {
        out.error = why;
        return out;
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        // "--opt=VALUE" as well as "--opt VALUE", as pipescope-trace takes them: a script that
        // wrote --out=run.db was told "unknown option --out=run.db".
        std::string a = args[i];
        std::optional<std::string> attached;
        if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            attached = a.substr(eq + 1);
            a.resize(eq);
        }
        auto value = [&](std::string* dst) -> bool {
            if (attached) {
                *dst = *attached;
                attached.reset();
                return true;
            }
            if (i + 1 >= args.size()) {
                return false;
            }
            *dst = args[++i];
            return true;
        };
        std::string v;
        if (a == "--help" || a == "-h") {
            o.help = true;
        } else if (a == "--version") {
            o.version = true;
        } else if (a == "--backend") {
            if (!value(&o.backend)) {
                return fail("--backend needs a value: sim, cpu or cuda");
            }
            if (o.backend != "sim" && o.backend != "cpu" && o.backend != "cuda") {
                return fail("--backend: unknown backend \"" + o.backend +
                            "\"; expected sim, cpu or cuda");
            }
        } else if (a == "--out") {
            if (!value(&o.out) || o.out.empty()) {
                return fail("--out needs a file name, not an empty string");
            }
        } else if (a == "--force") {
            o.force = true;
        } else if (a == "--iterations") {
            if (!value(&v)) {
                return fail("--iterations needs a number");
            }
            int n = 0;
            if (!parseInt(v, &n) || n < 1) {
                return fail("--iterations: must be a whole number from 1 to 2147483647, got \"" +
                            v + "\"");
            }
            o.iterations = n;
        } else if (a == "--summary-json") {
            if (!value(&o.summary_json) || o.summary_json.empty()) {
                return fail("--summary-json needs a file name or -, not an empty string");
            }
        } else if (a == "--progress") {
            if (!value(&v) || v != "jsonl") {
                return fail("--progress: the only format is jsonl");
            }
            o.progress_jsonl = true;
        } else if (a == "--set") {
            std::string why;
            if (!value(&v)) {
                return fail("--set needs KEY=VALUE");
            }
            auto ov = schedule::parseOverride(v, &why);
            if (!ov) {
                return fail("--set " + v + ": " + why);
            }
            o.overrides.push_back(*ov);
        } else if (a == "--sweep") {
            if (!value(&v)) {
                return fail("--sweep needs KEY=V1,V2,...");
            }
            const auto eq = v.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
                return fail("--sweep " + v +
                            ": expected KEY=V1,V2,... (e.g. model.vocab=32000,64000)");
            }
            SweepAxis axis{v.substr(0, eq), {}};
            std::string rest = v.substr(eq + 1);
            std::size_t start = 0;
            while (start <= rest.size()) {
                const auto comma = rest.find(',', start);
                const std::string item = rest.substr(
                    start, comma == std::string::npos ? std::string::npos : comma - start);
                if (item.empty()) {
                    return fail("--sweep " + v + ": an empty value in the list");
                }
                axis.values.push_back(item);
                if (comma == std::string::npos) {
                    break;
                }
                start = comma + 1;
            }
            if (const auto problem = schedule::configKeyProblem(axis.path)) {
                return fail("--sweep " + axis.path + ": " + *problem);
            }
            // A sweep point leaves out the file's compare list, so a swept one changed nothing:
            // every point was the same run, with exit 0 (the app's sweeps refuse it too).
            if (axis.path == "compare") {
                return fail(
                    "--sweep compare: the compare list is not a setting to sweep (each "
                    "point leaves it out); sweep another key, or run --compare");
            }
            for (const SweepAxis& earlier : o.sweeps) {
                if (earlier.path == axis.path) {
                    return fail("--sweep " + axis.path +
                                " is given twice; list all its values in one --sweep");
                }
            }
            o.sweeps.push_back(std::move(axis));
            std::size_t points = 1;
            for (const SweepAxis& each : o.sweeps) {
                // Checked after each factor: the product never gets near overflowing.
                points *= each.values.size();
                if (points > kMaxSweepPoints) {
                    return fail("--sweep: the combinations come to more than " +
                                std::to_string(kMaxSweepPoints) +
                                " points; sweep fewer values, or fewer keys at once");
                }
            }
        } else if (a == "--sweep-csv") {
            if (!value(&o.sweep_csv) || o.sweep_csv.empty()) {
                return fail("--sweep-csv needs a file name or -, not an empty string");
            }
        } else if (a == "--compare") {
            o.compare = true;
        } else if (a == "--save-schedule") {
            if (!value(&o.save_schedule) || o.save_schedule.empty()) {
                return fail("--save-schedule needs a file name, not an empty string");
            }
        } else if (a == "--schedule") {
            if (!value(&o.load_schedule) || o.load_schedule.empty()) {
                return fail("--schedule needs a file name, not an empty string");
            }
        } else if (a == "--print-schedule") {
            o.print_schedule = true;
        } else if (a == "--timeout") {
            if (!value(&v)) {
                return fail("--timeout needs a number of seconds");
            }
            try {
                std::size_t used = 0;
                o.timeout_s = std::stod(v, &used);
                // Waits are kept in whole milliseconds: below one, the timeout became 0 ms and
                // every run failed at once ("timed out after 0 ms").
                if (used != v.size() || !(o.timeout_s >= 0.001) || o.timeout_s > 1e6) {
                    throw std::invalid_argument(v);
                }
            } catch (const std::exception&) {
                return fail(
                    "--timeout: expected seconds from 0.001 (a millisecond) to 1000000, "
                    "got \"" +
                    v + "\"");
            }
            o.timeout_given = true;
        } else if (a == "--gemm-report") {
            o.gemm_report = true;
        } else if (a == "--rank" || a == "--world-size") {
            int n = 0;
            if (!value(&v) || !parseInt(v, &n) || n < (a == "--rank" ? 0 : 1)) {
                return fail(a + " needs a whole number" +
                            (a == "--rank" ? std::string() : std::string(" of at least 1")));
            }
            (a == "--rank" ? o.rank : o.world_size) = n;
        } else if (a == "--rendezvous") {
            if (!value(&o.rendezvous) || o.rendezvous.empty()) {
                return fail("--rendezvous needs HOST:PORT");
            }
        } else if (a == "--transport") {
            if (!value(&o.transport) ||
                (o.transport != "auto" && o.transport != "socket" && o.transport != "mpi")) {
                return fail("--transport needs auto, socket or mpi");
            }
        } else if (a == "--nccl") {
            if (!value(&v) || (v != "on" && v != "off")) {
                return fail("--nccl needs on or off");
            }
            o.nccl = v == "on";
        } else if (a == "--lane-sync") {
            if (!value(&v) || (v != "op" && v != "event")) {
                return fail("--lane-sync needs op or event");
            }
            o.event_sync = v == "event";
        } else if (a == "--cupti") {
            if (!value(&v) || (v != "on" && v != "off")) {
                return fail("--cupti needs on or off");
            }
            o.cupti = v == "on";
        } else if (a == "--list-devices") {
            o.list_devices = true;
        } else if (a == "--json") {
            o.json = true;
        } else if (!a.empty() && a[0] == '-' && a != "-") {
            if (const auto meant = schedule::closestName(a, kOptionNames)) {
                return fail("unknown option " + a + " (did you mean " + std::string(*meant) + "?)");
            }
            return fail("unknown option " + a + " (see pipescope-run --help)");
        } else if (a.empty()) {
            return fail("the config file name is an empty string");
        } else if (o.config_path.empty()) {
            o.config_path = a;
        } else {
            return fail("unexpected argument \"" + a + "\": give one config file");
        }
        if (attached) {
            return fail(a + " takes no value, but was given \"" + *attached + "\"");
        }
    }
    if (!o.help && !o.version && !o.list_devices && o.config_path.empty()) {
        return fail("no config file given (see pipescope-run --help)");
    }
    if (!o.sweeps.empty() && o.backend != "sim") {
        return fail("--sweep runs the simulator; use it with --backend sim");
    }
    if (!o.sweeps.empty() && o.compare) {
        return fail("--sweep and --compare cannot be combined");
    }
    if (!o.sweep_csv.empty() && o.sweeps.empty()) {
        return fail("--sweep-csv needs at least one --sweep");
    }
    if (o.json && !o.list_devices) {
        return fail("--json goes with --list-devices; for a run's summary use --summary-json");
    }
    // Options a mode would silently ignore are refused, so that nobody waits for a file that
    // never comes.
    const auto refuse = [&](const char* mode,
                            std::initializer_list<std::pair<bool, const char*>> given)
        -> std::optional<std::string> {
        for (const auto& [set, name] : given) {
            if (set) {
                return std::string(name) + " cannot be combined with " + mode;
            }
        }
        return std::nullopt;
    };
    if (!o.sweeps.empty()) {
        if (auto e = refuse("--sweep (it writes a table; use --sweep-csv for a file)",
                            {{!o.out.empty(), "--out"},
                             {!o.summary_json.empty(), "--summary-json"},
                             {o.progress_jsonl, "--progress"},
                             {!o.load_schedule.empty(), "--schedule"},
                             {!o.save_schedule.empty(), "--save-schedule"},
                             {o.print_schedule, "--print-schedule"}})) {
            return fail(*e);
        }
    }
    if (o.compare) {
        if (auto e = refuse("--compare (it writes a table, and with --out one trace per variant)",
                            {{!o.summary_json.empty(), "--summary-json"},
                             {!o.load_schedule.empty(), "--schedule"},
                             {!o.save_schedule.empty(), "--save-schedule"},
                             {o.print_schedule, "--print-schedule"}})) {
            return fail(*e);
        }
    }
    if (o.backend != "sim" && !o.list_devices && !o.help && !o.version) {
        if (o.compare) {
            return fail("--compare runs the simulator; use it with --backend sim");
        }
        if (o.out.empty()) {
            return fail("--backend " + o.backend +
                        " needs --out RUN.db: a real run always "
                        "writes its trace");
        }
    }
    if ((o.rank || o.world_size || !o.rendezvous.empty() || o.transport != "auto") &&
        o.backend == "sim") {
        return fail(
            "--rank, --world-size, --rendezvous and --transport start one rank of a "
            "multi-process run; use them with --backend cpu or cuda");
    }
    if (o.nccl && o.backend != "cuda") {
        return fail("--nccl connects GPUs; use it with --backend cuda");
    }
    if (o.event_sync && o.backend != "cuda") {
        return fail("--lane-sync orders the streams of a GPU; use it with --backend cuda");
    }
    if (o.cupti && o.backend != "cuda") {
        return fail("--cupti traces the GPU; use it with --backend cuda");
    }
    if (o.backend == "sim" && o.timeout_given) {
        return fail("--timeout bounds the waits of a real run; use it with --backend cpu or cuda");
    }
    if (o.backend == "sim" && o.gemm_report) {
        return fail("--gemm-report measures a real run; use it with --backend cpu or cuda");
    }
    // stdout carries one machine-readable stream at most.
    const int to_stdout = (o.summary_json == "-" ? 1 : 0) + (o.save_schedule == "-" ? 1 : 0) +
                          (o.sweep_csv == "-" ? 1 : 0) + (o.progress_jsonl ? 1 : 0);
    if (to_stdout > 1) {
        return fail(
            "only one of --summary-json -, --save-schedule -, --sweep-csv - and --progress jsonl "
            "can write to stdout; give the others a file name");
    }
    // An output never replaces an input or another output: --summary-json run.json naming the
    // config, or the trace given to --out, would destroy what the user made.
    const std::vector<std::pair<const char*, std::string>> inputs = {
        {"the config file", o.config_path}, {"the --schedule file", o.load_schedule}};
    std::vector<std::pair<const char*, std::string>> outputs;
    for (const auto& [name, path] : std::initializer_list<std::pair<const char*, std::string>>{
             {"--out", o.out},
             {"--summary-json", o.summary_json},
             {"--sweep-csv", o.sweep_csv},
             {"--save-schedule", o.save_schedule}}) {
        if (path.empty() || path == "-") {
            continue;
        }
        for (const auto& [other, other_path] : inputs) {
            if (!other_path.empty() && sameTarget(path, other_path)) {
                return fail(std::string(name) + " " + path + " is " + other +
                            "; refusing to overwrite it");
            }
        }
        for (const auto& [other, other_path] : outputs) {
            if (sameTarget(path, other_path)) {
                return fail(std::string(name) + " and " + other + " name the same file, " + path);
            }
        }
        outputs.emplace_back(name, path);
        if (std::string(name) != "--out") {
            if (const std::string why = unwritable(path); !why.empty()) {
                return fail(std::string(name) + " " + path + ": cannot write there (" + why + ")");
            }
        }
    }
    out.options = std::move(o);
    return out;
}

}  // namespace pipescope::cli
