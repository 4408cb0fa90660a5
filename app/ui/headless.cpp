#include "headless.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <QFileInfo>

#include <pipescope/app/runner_process.h>
#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/simulation_job.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>

#include "chart_export.h"
#include "summary_view.h"
#include "sweep_view.h"
#include "trace_chart.h"

namespace pipescope::app {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int kExitFailed = 4;

void err(const QString& s) {
    std::fprintf(stderr, "pipescope: %s\n", s.toLocal8Bit().constData());
}

struct Args {
    QString view;
    QString out;
    QString config;
    QStringList traces;
    std::vector<schedule::Override> overrides;  // --set KEY=VALUE, applied to --config
    QString sweep = QStringLiteral("model.vocab=32000,64000,128000,256000");
    bool sweep_given = false;
    int width = 1600;
    int height = 0;
    double dpi = 96;
};

std::optional<Args> parse(const QStringList& argv, QString* error) {
    Args a;
    for (int i = 1; i < argv.size(); ++i) {
        // --opt=VALUE as well as --opt VALUE, as pipescope-run and pipescope-trace take them.
        QString s = argv[i];
        std::optional<QString> attached;
        if (const qsizetype eq = s.indexOf(QLatin1Char('='));
            s.startsWith(QLatin1String("--")) && eq > 0) {
            attached = s.mid(eq + 1);
            s.truncate(eq);
        }
        const auto value = [&](const char* name) -> std::optional<QString> {
            if (attached) {
                return std::exchange(attached, std::nullopt);
            }
            if (i + 1 >= argv.size()) {
                *error = QStringLiteral("%1 needs a value").arg(QLatin1String(name));
                return std::nullopt;
            }
            return argv[++i];
        };
        const auto number = [&](const char* name, double* out) {
            auto v = value(name);
            if (!v) {
                return false;
            }
            bool ok = false;
            *out = v->toDouble(&ok);
            if (!ok) {
                *error = QStringLiteral("%1: not a number: %2").arg(QLatin1String(name), *v);
            }
            return ok;
        };
        // A size in whole logical px: "16.7" was cut to 16 and "4294967312" cast to an int
        // (undefined; it read -2147483648 in the message). 0 keeps the view's own size.
        const auto side = [&](const char* name, int* out) {
            auto v = value(name);
            if (!v) {
                return false;
            }
            bool ok = false;
            const qlonglong px = v->toLongLong(&ok);
            if (!ok) {
                *error =
                    QStringLiteral("%1: not a whole number of px: %2").arg(QLatin1String(name), *v);
                return false;
            }
            if (px != 0 && (px < kExportMinSide || px > kExportMaxSide)) {
                *error = QStringLiteral("%1 %2 px is out of range (%3 to %4 logical px)")
                             .arg(QLatin1String(name))
                             .arg(px)
                             .arg(kExportMinSide)
                             .arg(kExportMaxSide);
                return false;
            }
            *out = static_cast<int>(px);
            return true;
        };
        if (s == QLatin1String("--export")) {
            auto v = value("--export");
            if (!v) {
                return std::nullopt;
            }
            a.view = *v;
        } else if (s == QLatin1String("--out")) {
            auto v = value("--out");
            if (!v) {
                return std::nullopt;
            }
            a.out = *v;
        } else if (s == QLatin1String("--config")) {
            auto v = value("--config");
            if (!v) {
                return std::nullopt;
            }
            a.config = *v;
        } else if (s == QLatin1String("--set")) {
            auto v = value("--set");
            if (!v) {
                return std::nullopt;
            }
            std::string why;
            auto o = schedule::parseOverride(v->toStdString(), &why);
            if (!o) {
                *error = QStringLiteral("--set %1: %2").arg(*v, QString::fromStdString(why));
                return std::nullopt;
            }
            a.overrides.push_back(std::move(*o));
        } else if (s == QLatin1String("--sweep")) {
            auto v = value("--sweep");
            if (!v) {
                return std::nullopt;
            }
            if (a.sweep_given) {
                *error = QStringLiteral(
                    "--sweep is given twice: the sweep chart has one key on its axis; fix the "
                    "others with --set");
                return std::nullopt;
            }
            a.sweep = *v;
            a.sweep_given = true;
        } else if (s == QLatin1String("--width")) {
            if (!side("--width", &a.width)) {
                return std::nullopt;
            }
        } else if (s == QLatin1String("--height")) {
            if (!side("--height", &a.height)) {
                return std::nullopt;
            }
        } else if (s == QLatin1String("--dpi")) {
            if (!number("--dpi", &a.dpi)) {
                return std::nullopt;
            }
        } else if (s.startsWith(QLatin1String("--"))) {
            *error = QStringLiteral("unknown option %1").arg(s);
            return std::nullopt;
        } else {
            a.traces << s;
        }
    }
    const QStringList views = {QStringLiteral("timeline"), QStringLiteral("memory"),
                               QStringLiteral("summary"), QStringLiteral("compare"),
                               QStringLiteral("sweep")};
    if (!views.contains(a.view)) {
        *error = QStringLiteral("--export: unknown view \"%1\"; expected one of %2")
                     .arg(a.view, views.join(QStringLiteral(", ")));
        return std::nullopt;
    }
    if (a.out.isEmpty()) {
        *error = QStringLiteral("--out FILE.{png,svg,pdf} is required");
        return std::nullopt;
    }
    if (a.config.isEmpty() == a.traces.isEmpty()) {
        *error = QStringLiteral("give either --config CONFIG.json or one or more RUN.db files");
        return std::nullopt;
    }
    if (!a.overrides.empty() && a.config.isEmpty()) {
        *error = QStringLiteral("--set changes a config: give --config CONFIG.json");
        return std::nullopt;
    }
    if (a.view == QLatin1String("sweep") && a.config.isEmpty()) {
        *error = QStringLiteral("--export sweep needs --config CONFIG.json");
        return std::nullopt;
    }
    if (a.sweep_given && a.view != QLatin1String("sweep")) {
        *error = QStringLiteral("--sweep goes with --export sweep, not --export %1").arg(a.view);
        return std::nullopt;
    }
    if (a.traces.size() > 1 && a.view != QLatin1String("compare")) {
        *error = QStringLiteral(
                     "--export %1 draws one run, but %2 were given; give one RUN.db, or "
                     "--export compare to draw them together")
                     .arg(a.view)
                     .arg(a.traces.size());
        return std::nullopt;
    }
    return a;
}

}  // namespace

QString argumentNotUtf8(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const QByteArray raw(argv[i]);
        const QString text = QString::fromUtf8(raw);
        if (text.toUtf8() != raw) {
            return QStringLiteral(
                       "argument %1 (\"%2\") is not UTF-8 text: the app can neither read nor "
                       "write a file of that name; rename it (convmv renames a whole folder)")
                .arg(i)
                .arg(text);
        }
    }
    return {};
}

QString headlessUsage() {
    return QStringLiteral(
        "usage: pipescope [--show explore|compare|sweep|run] [RUN.db | CONFIG.json ...]\n"
        "       pipescope --export VIEW --out FILE.{png,svg,pdf} (--config CONFIG.json | RUN.db "
        "...)\n"
        "                 [--set KEY=VALUE ...] [--width PX] [--height PX] [--dpi N]\n"
        "                 [--sweep KEY=V1,V2,...]\n"
        "VIEW: timeline, memory, summary, compare, sweep. With --config the config is simulated;\n"
        "compare uses the config's \"compare\" list (or every vocabulary method when it has "
        "none),\n"
        "or the given runs. Works with no display.\n");
}

bool wantsHeadless(const QStringList& args) {
    return args.contains(QStringLiteral("--export")) ||
           std::any_of(args.begin(), args.end(),
                       [](const QString& a) { return a.startsWith(QLatin1String("--export=")); });
}

int runHeadless(const QStringList& argv) {
    QString error;
    const auto a = parse(argv, &error);
    if (!a) {
        // The message says what is wrong; the options are one command away, not 30 lines
        // that push it off the screen.
        err(error + QStringLiteral(" (pipescope --help lists the options)"));
        return kExitBadInput;
    }
    if (!formatForPath(a->out)) {
        err(QStringLiteral("%1: unknown image type \"%2\"; use .png, .svg or .pdf")
                .arg(a->out, QFileInfo(a->out).suffix()));
        return kExitBadInput;
    }

    // The runs: simulated from the config, or read from the trace files.
    std::vector<RunDataPtr> runs;
    std::optional<schedule::Config> config;
    if (!a->config.isEmpty()) {
        auto parsed = schedule::loadConfigFile(a->config.toStdString(), a->overrides);
        if (!parsed.ok()) {
            err(QString::fromStdString(parsed.errorText()));
            return kExitBadInput;
        }
        config = parsed.config;
        if (a->view == QLatin1String("compare")) {
            if (config->compare.empty()) {
                SimRequest req;
                req.kind = SimRequest::Kind::Methods;
                req.config = *config;
                auto out = runSimRequest(req);
                runs = out.runs;
                for (const auto& e : out.errors) {
                    err(QString::fromStdString(e));
                }
            }
            for (const auto& variant : config->compare) {
                auto applied = schedule::applyVariant(*config, variant);
                if (!applied.ok()) {
                    err(QString::fromStdString(applied.errorText()));
                    return kExitBadInput;
                }
                auto sim = sim::simulate(*applied.config);
                if (!sim.result) {
                    err(QString::fromStdString(variant.label + ": " + sim.error));
                    return kExitBadInput;
                }
                runs.push_back(std::make_shared<SimRunData>(std::move(*sim.result), variant.label));
            }
        } else if (a->view != QLatin1String("sweep")) {
            auto sim = sim::simulate(*config);
            if (!sim.result) {
                err(QString::fromStdString(sim.error));
                return kExitBadInput;
            }
            // The image stands alone: its title names the config, schedule and method, not just
            // the method as the explorer (beside its config panel) does.
            const std::string title = standaloneConfigName(*config).toStdString() + " \u00b7 " +
                                      std::string(toString(config->parallel.schedule)) +
                                      " \u00b7 " + std::string(toString(config->parallel.vocab));
            runs.push_back(std::make_shared<SimRunData>(std::move(*sim.result), title));
        }
    } else {
        for (const QString& path : a->traces) {
            std::string e;
            auto data = TraceRunData::open(path.toStdString(), &e);
            if (!data) {
                err(QString::fromStdString(e));
                return kExitBadInput;
            }
            runs.push_back(std::move(data));
        }
    }

    ExportOptions options;
    options.width = a->width;
    options.dpi = a->dpi;
    ExportResult result;
    if (a->view == QLatin1String("timeline") || a->view == QLatin1String("memory") ||
        a->view == QLatin1String("compare")) {
        const bool memory = a->view == QLatin1String("memory");
        const bool compare = a->view == QLatin1String("compare");
        TraceChart chart;
        const int height = a->height > 0 ? a->height
                                         : (compare ? 260 * static_cast<int>(runs.size()) + 80
                                                    : (memory ? 760 : 520));
        chart.resize(a->width, height);
        if (!compare) {
            chart.setTitle(QString::fromStdString(runs.front()->name()) + QStringLiteral(" — ") +
                           headline(*runs.front()));
            // An image of a run that did not finish says so, as the summary and the app's tab do.
            chart.setNote(unfinishedNote(runs.front()->stats()));
        } else if (config) {
            chart.setTitle(standaloneConfigName(*config) +
                           QStringLiteral(" \u2014 vocabulary methods"));
        } else {
            // Measured runs, as a comparison in the app shows them: lined up at their first
            // measured iteration and drawn there, not as a barcode of every iteration.
            chart.setTitle(
                QStringLiteral("Comparison of %1 runs, from the first measured iteration of each")
                    .arg(runs.size()));
            QStringList notes;
            for (auto& run : runs) {
                if (const QString note = unfinishedNote(run->stats()); !note.isEmpty()) {
                    notes << QString::fromStdString(run->name()) + QStringLiteral(": ") + note;
                }
                run = alignedAtFirstMeasured(run);
            }
            chart.setNote(notes.join(QStringLiteral("; ")));
        }
        chart.setRuns(runs, memory || compare ? memory : false);
        if (compare && !config) {
            chart.showFirstIterations();
        }
        options.height = height;
        result = exportPlot(&chart, a->out, options);
    } else if (a->view == QLatin1String("summary")) {
        QCustomPlot plot;
        plot.resize(a->width, a->height > 0 ? a->height : 600);
        fillSummaryPlot(&plot, *runs.front());
        options.height = plot.height();
        result = exportPlot(&plot, a->out, options);
    } else {
        const QString spec = a->sweep;
        const int eq = static_cast<int>(spec.indexOf(QLatin1Char('=')));
        if (eq <= 0) {
            err(QStringLiteral("--sweep: expected KEY=V1,V2,..., got \"%1\"").arg(spec));
            return kExitBadInput;
        }
        if (const QString problem = sweepKeyProblem(spec.left(eq).trimmed()); !problem.isEmpty()) {
            err(QStringLiteral("--sweep: ") + problem);
            return kExitBadInput;
        }
        auto values = parseSweepValues(spec.mid(eq + 1), &error);
        if (!values) {
            err(error);
            return kExitBadInput;
        }
        SimRequest req;
        req.kind = SimRequest::Kind::Sweep;
        req.config = *config;
        req.sweep_key = spec.left(eq).toStdString();
        req.sweep_values = *values;
        const auto out = runSimRequest(req);
        for (const QString& problem : sweepProblems(out.sweep)) {
            err(problem);
        }
        QCustomPlot plot;
        plot.resize(a->width, a->height > 0 ? a->height : 560);
        // The image stands alone: it names its config (whose name carries the --set changes)
        // and schedule, unless the schedule is what is swept; the methods are its lines.
        fillSweepPlot(&plot, out.sweep, spec.left(eq), sweepBaseTitle(*config, spec.left(eq)));
        options.height = plot.height();
        result = exportPlot(&plot, a->out, options);
    }
    if (!result.ok) {
        err(result.error);
        return result.bad_request ? kExitBadInput : kExitFailed;
    }
    // A script reads the path from here: losing it is not a success.
    return printOut(QFileInfo(a->out).absoluteFilePath() + QLatin1Char('\n'));
}

int printOut(const QString& text) {
    const QByteArray bytes = text.toLocal8Bit();
    const auto size = static_cast<std::size_t>(bytes.size());
    if (std::fwrite(bytes.constData(), 1, size, stdout) != size || std::fflush(stdout) != 0) {
        err(QStringLiteral("cannot write to standard output"));
        return kExitFailed;
    }
    return kExitOk;
}

}  // namespace pipescope::app
