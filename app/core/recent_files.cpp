#include <memory>

#include <QFileInfo>
#include <QSettings>

#include <pipescope/app/recent_files.h>

namespace pipescope::app {

namespace {

QString canonical(const QString& path) {
    const QFileInfo info(path);
    const QString c = info.canonicalFilePath();
    return c.isEmpty() ? info.absoluteFilePath() : c;
}

}  // namespace

RecentFiles::RecentFiles(QString key, int max, QString settings_path)
    : key_(std::move(key)), max_(std::max(1, max)), settings_path_(std::move(settings_path)) {}

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
    s->setValue(key_, list);
}

void RecentFiles::add(const QString& path) {
    const QString c = canonical(path);
    QStringList list = load();
    list.removeAll(c);
    list.prepend(c);
    while (list.size() > max_) {
        list.removeLast();
    }
    store(list);
}

void RecentFiles::remove(const QString& path) {
    QStringList list = load();
    list.removeAll(canonical(path));
    store(list);
}

void RecentFiles::clear() {
    store({});
}

QStringList RecentFiles::files() const {
    QStringList out;
    for (const QString& p : load()) {
        if (QFileInfo::exists(p)) {
            out << p;
        }
    }
    return out;
}

}  // namespace pipescope::app
