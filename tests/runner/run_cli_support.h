// Helpers of the pipescope-run CLI tests: running the binary, reading its JSON and tables.
#pragma once

#include <cmath>

#include <QByteArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QRegularExpression>
#include <QString>
#include <QStringList>
#include <QtTest>

#include "testsupport.h"

namespace pipescope::test {

inline const QString kRun = QStringLiteral("pipescope-run");
inline const QString kTraceCli = QStringLiteral("pipescope-trace");

inline QString preset(const QString& name) {
    return sourcePath(QStringLiteral("resources/presets/") + name);
}

inline QString describe(const ProcessResult& r) {
    return QStringLiteral("exit %1%2\nstdout:\n%3\nstderr:\n%4")
        .arg(r.exit_code)
        .arg(r.crashed     ? " (crashed)"
             : r.timed_out ? " (timed out)"
                           : "")
        .arg(QString::fromUtf8(r.out.left(4000)), QString::fromUtf8(r.err.left(4000)));
}

// The whole text must be one JSON object; *error says why not.
inline QJsonObject parseObject(const QByteArray& bytes, QString* error) {
    QJsonParseError e;
    const QJsonDocument doc = QJsonDocument::fromJson(bytes, &e);
    if (e.error != QJsonParseError::NoError) {
        *error = QStringLiteral("not JSON: %1 at offset %2").arg(e.errorString()).arg(e.offset);
        return {};
    }
    if (!doc.isObject()) {
        *error = QStringLiteral("JSON, but not an object");
        return {};
    }
    error->clear();
    return doc.object();
}

inline bool relativelyEqual(double a, double b, double tolerance) {
    return std::abs(a - b) <= tolerance * std::max(std::abs(a), std::abs(b));
}

// A JSON number that holds a whole number (QJsonValue keeps integers that fit in 64 bits).
inline bool isWholeNumber(const QJsonValue& v) {
    return v.isDouble() && v.toDouble() == std::floor(v.toDouble()) &&
           static_cast<double>(v.toInteger(-1)) == v.toDouble();
}

// Lines of a text table: cells are separated by two or more spaces.
inline QList<QStringList> tableRows(const QByteArray& text) {
    QList<QStringList> rows;
    for (const QString& line : QString::fromUtf8(text).split('\n', Qt::SkipEmptyParts)) {
        rows.append(line.trimmed().split(QRegularExpression(QStringLiteral(" {2,}"))));
    }
    return rows;
}

}  // namespace pipescope::test
