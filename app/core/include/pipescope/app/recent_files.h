// Recently opened files, most recent first, kept in QSettings.
#pragma once

#include <QString>
#include <QStringList>

namespace pipescope::app {

class RecentFiles {
  public:
    // `key`: the QSettings key of the list; `max`: how many are kept. `settings_path`: an INI
    // file to use instead of the application's settings (tests).
    explicit RecentFiles(QString key, int max = 10, QString settings_path = {});

    void add(const QString& path);
    void remove(const QString& path);
    void clear();
    // Most recent first; files that no longer exist are left out.
    QStringList files() const;

  private:
    QStringList load() const;
    void store(const QStringList& list) const;

    QString key_;
    int max_;
    QString settings_path_;
};

}  // namespace pipescope::app
