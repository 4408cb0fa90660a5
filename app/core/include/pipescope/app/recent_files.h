// Recently opened files, most recent first, kept in QSettings as absolute paths (canonical where
// the file exists, so one file reached two ways is listed once).
#pragma once

#include <QString>
#include <QStringList>

namespace pipescope::app {

class RecentFiles {
  public:
    // `key`: the QSettings key of the list; `max`: how many are kept (at least 1).
    // `settings_path`: an INI file to use instead of the application's QSettings (tests, or a
    // portable install).
    explicit RecentFiles(QString key, int max = 10, QString settings_path = {});

    // Puts `path` first, dropping an older entry for the same file and the oldest past `max`.
    void add(const QString& path);
    void remove(const QString& path);
    void clear();
    // Most recent first; with `existing_only`, files that no longer exist are left out (they stay
    // stored, so a file on a drive that comes back reappears).
    QStringList files(bool existing_only = true) const;

    const QString& key() const { return key_; }
    int maxCount() const { return max_; }

  private:
    QStringList load() const;
    void store(const QStringList& list) const;

    QString key_;
    int max_;
    QString settings_path_;
};

// Why settings (in the INI file `settings_path`, or the application's QSettings when empty)
// cannot be saved: the file or its folder is not writable (XDG_CONFIG_HOME naming a file, a
// read-only home). Empty when they can. The window layout, recent files, the runs folder and the
// last config are kept there, and were lost at every close without a word.
QString settingsNotWritable(const QString& settings_path = {});

}  // namespace pipescope::app
