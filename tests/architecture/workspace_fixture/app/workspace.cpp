// Fixture of the front-end workspace check (check_app.cmake): the application layer may load the data directory.
auto db = hw_io::load_hardware_db(dir);
