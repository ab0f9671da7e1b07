// Fixture: a command that repeats the bootstrap (reported: one line).
auto lib = wl_io::load_model_library(*dir);
