#include <algorithm>
#include <memory>
#include <utility>

#include <QFileInfo>
#include <QSettings>

#include <pipescope/app/recent_files.h>

namespace pipescope::app {

namespace {

// The canonical path of an existing file (links and "..", resolved), else the cleaned absolute
// path, so that a file that has gone can still be removed by the name it was added under.
QString normalized(const QString& path) {
    const QFileInfo info(path);
    const QString canonical = info.canonicalFilePath();
    return canonical.isEmpty() ? info.absoluteFilePath() : canonical;
}

bool sameFile(const QString& stored, const QString& path) {
    return stored == path || normalized(stored) == path;
}

}  // namespace

RecentFiles::RecentFiles(QString key, int max, QString settings_path)
    : key_(std::move(key)), max_(std::max(1, max)), settings_path_(std::move(settings_path)) {}

QString settingsNotWritable(const QString& settings_path) {
    const auto s = settings_path.isEmpty()
                       ? std::make_unique<QSettings>()
                       : std::make_unique<QSettings>(settings_path, QSettings::IniFormat);
    if (s->isWritable()) {
        return {};
    }
    return QObject::tr(
               "Settings cannot be saved to %1 (it or its folder is not writable): the "
               "window layout, recent files, runs folder and last config will not be "
               "kept after this session")
        .arg(s->fileName());
}

QStringList RecentFiles::load() const {
    const auto s = settings_path_.isEmpty()
                       ? std::make_unique<QSettings>()
                       : std::make_unique<QSettings>(settings_path_, QSettings::IniFormat);
    return s->value(key_).toStringList();
}

void RecentFiles::store(const QStringList& list) const {
    const auto s = settings_path_.isEmpty()
                       ? std::make_unique<QSettings>()
                       : std::make_unique<QSettings>(settings_path_, QSettings::IniFormat);
    if (list.isEmpty()) {
        s->remove(key_);
    } else {
        s->setValue(key_, list);
    }
}

void RecentFiles::add(const QString& path) {
    if (path.isEmpty()) {
        return;
    }
    const QString p = normalized(path);
    QStringList list = load();
    list.removeIf([&](const QString& stored) { return sameFile(stored, p); });
    list.prepend(p);
    while (list.size() > max_) {
        list.removeLast();
    }
    store(list);
}

void RecentFiles::remove(const QString& path) {
    const QString p = normalized(path);
    const QString absolute = QFileInfo(path).absoluteFilePath();
    QStringList list = load();
    list.removeIf([&](const QString& stored) { return sameFile(stored, p) || stored == absolute; });
    store(list);
}

void RecentFiles::clear() {
    store({});
}

QStringList RecentFiles::files(bool existing_only) const {
    QStringList out = load();
    if (existing_only) {
        out.removeIf([](const QString& p) { return !QFileInfo::exists(p); });
    }
    return out;
}

}  // namespace pipescope::app
