// Fixture: a command that starts from the application layer's workspace (not reported).
const auto ws = app::open_workspace(g.data_dir);
if (!app::write_file_atomically(path, text, diags)) return report(diags);
