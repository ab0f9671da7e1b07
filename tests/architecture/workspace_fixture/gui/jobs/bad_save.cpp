// Fixture: a GUI file with its own atomic writer (reported: one line).
QSaveFile f(path);
