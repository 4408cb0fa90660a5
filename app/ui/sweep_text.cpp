#include "sweep_text.h"

#include <algorithm>
#include <utility>

#include <QObject>
#include <QRegularExpression>

#include <pipescope/schedule/config_parse.h>

namespace pipescope::app {

QString sweepValueText(const std::string& value) {
    const QString text = QString::fromStdString(value);
    if (text.size() >= 2 && text.startsWith(QLatin1Char('"')) && text.endsWith(QLatin1Char('"'))) {
        return text.mid(1, text.size() - 2);
    }
    return text;
}

QString sweepKeyProblem(const QString& key) {
    if (key.isEmpty()) {
        return QObject::tr("sweep key: name a config key, such as model.vocab");
    }
    if (key == QLatin1String("parallel.vocab") || key == QLatin1String("parallel")) {
        return QObject::tr(
                   "sweep key %1: the sweep already draws one line per vocabulary method; "
                   "sweep another key (model.vocab, parallel.pipeline, "
                   "parallel.schedule, ...)")
            .arg(key);
    }
    if (key == QLatin1String("compare") || key.startsWith(QLatin1String("compare."))) {
        return QObject::tr("sweep key %1: the compare list is not a setting to sweep").arg(key);
    }
    // Checked once here, not reported again for every point of the sweep.
    if (const auto problem = schedule::configKeyProblem(key.toStdString())) {
        return QObject::tr("sweep key %1: %2").arg(key, QString::fromStdString(*problem));
    }
    return {};
}

QStringList sweepProblems(const std::vector<SweepPoint>& points) {
    std::vector<std::string> methods;
    for (const auto& p : points) {
        if (std::find(methods.begin(), methods.end(), p.method) == methods.end()) {
            methods.push_back(p.method);
        }
    }
    // (value, reason) in the order met, with the methods that failed there for it.
    std::vector<std::pair<std::pair<std::string, std::string>, QStringList>> groups;
    for (const auto& p : points) {
        if (p.ok) {
            continue;
        }
        const auto key = std::pair(p.value, p.error);
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const auto& g) { return g.first == key; });
        if (it == groups.end()) {
            groups.emplace_back(key, QStringList());
            it = groups.end() - 1;
        }
        it->second << QString::fromStdString(p.method);
    }
    QStringList out;
    for (const auto& [key, failed] : groups) {
        const QString who = methods.size() > 1 && failed.size() == static_cast<int>(methods.size())
                                ? QObject::tr("every method")
                                : failed.join(QStringLiteral(", "));
        // The config is the one in the panel: its place in a file ("<current config>:4:15: ")
        // says nothing here.
        static const QRegularExpression place(QStringLiteral("^<[^>]*>(:\\d+:\\d+)?: "));
        out << who + QObject::tr(" at ") + sweepValueText(key.first) + QStringLiteral(": ") +
                   QString::fromStdString(key.second).remove(place);
    }
    return out;
}

QString sweepLeftOut(const std::vector<SweepPoint>& points) {
    // The values each set of methods lacks, in sweep order: "naive, vocab-2 at 3, 5".
    std::vector<std::pair<QStringList, QStringList>> by_methods;  // methods, values
    std::vector<std::string> values;
    for (const auto& p : points) {
        if (std::find(values.begin(), values.end(), p.value) == values.end()) {
            values.push_back(p.value);
        }
    }
    for (const auto& v : values) {
        QStringList failed;
        for (const auto& p : points) {
            if (p.value == v && !p.ok) {
                failed << QString::fromStdString(p.method);
            }
        }
        if (failed.isEmpty()) {
            continue;
        }
        auto it = std::find_if(by_methods.begin(), by_methods.end(),
                               [&](const auto& g) { return g.first == failed; });
        if (it == by_methods.end()) {
            by_methods.emplace_back(failed, QStringList());
            it = by_methods.end() - 1;
        }
        it->second << sweepValueText(v);
    }
    QStringList parts;
    for (const auto& [methods, at] : by_methods) {
        parts << methods.join(QStringLiteral(", ")) + QObject::tr(" at ") +
                     at.join(QStringLiteral(", "));
    }
    return parts.isEmpty() ? QString()
                           : QObject::tr("left out, could not be simulated: %1")
                                 .arg(parts.join(QStringLiteral("; ")));
}

std::optional<std::vector<std::string>> parseSweepValues(const QString& text, QString* error) {
    std::vector<std::string> out;
    for (QString v : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        v = v.trimmed();
        if (v.isEmpty()) {
            continue;
        }
        bool numeric = false;
        v.toDouble(&numeric);
        if (!numeric && !v.startsWith(QLatin1Char('"'))) {
            v = QLatin1Char('"') + v + QLatin1Char('"');  // a string value such as a method
        }
        out.push_back(v.toStdString());
    }
    if (out.empty()) {
        *error = QObject::tr("sweep values: give at least one value, separated by commas");
        return std::nullopt;
    }
    if (out.size() > 64) {
        *error = QObject::tr("sweep values: at most 64 values, got %1").arg(out.size());
        return std::nullopt;
    }
    return out;
}

}  // namespace pipescope::app
