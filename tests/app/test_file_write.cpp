// app::write_file_atomically (app/src/file_write.cpp): the one file writer of the CLI and the GUI.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <doctest/doctest.h>

#include "gpuplan/app/file_write.hpp"

using namespace gpuplan;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir() {
  const fs::path p = fs::temp_directory_path() / fs::path("gpuplan-test-app-file-write");
  fs::create_directories(p);
  return p;
}
}  // namespace

TEST_CASE("a failed write leaves the existing profile untouched") {
  const fs::path dir = temp_dir() / "atomic";
  fs::create_directories(dir);
  const fs::path path = dir / "profile.json";
  std::ofstream(path) << "old";
  // A folder in the way of the folder to create fails the write before anything is touched.
  Diagnostics d;
  CHECK_FALSE(app::write_file_atomically((dir / "profile.json" / "x.json").string(), "new", d));
  CHECK(d.has_errors());
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "old");
  fs::remove_all(dir);
}

TEST_CASE("an atomic write goes through a symbolic link, keeps permissions, and refuses inputs, folders and devices") {
  const fs::path dir = temp_dir() / "atomic-rules";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const fs::path real = dir / "real.json", link = dir / "link.json";
  std::ofstream(real) << "old";
  fs::permissions(real, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink(real, link);
  Diagnostics d;
  REQUIRE(app::write_file_atomically(link.string(), "new", d));
  CHECK(fs::is_symlink(fs::symlink_status(link)));  // the link stays
  CHECK(slurp(real) == "new");
  CHECK((fs::status(real).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += fs::is_regular_file(e.symlink_status()) ? 1 : 0;
  CHECK(files == 1);  // real.json: no temporary file left beside it

  Diagnostics in;
  CHECK_FALSE(app::write_file_atomically(real.string(), "x", in, {link.string()}));  // the same file by another name
  CHECK(in.to_string().find("is the input file") != std::string::npos);
  CHECK(slurp(real) == "new");

  Diagnostics folder;
  CHECK_FALSE(app::write_file_atomically(dir.string(), "x", folder));
  CHECK(folder.to_string().find("is a folder") != std::string::npos);
  if (fs::exists("/dev/null")) {
    Diagnostics dev;
    CHECK_FALSE(app::write_file_atomically("/dev/null", "x", dev));
    CHECK(dev.to_string().find("is not a regular file") != std::string::npos);
    CHECK(fs::is_character_file("/dev/null"));  // not replaced by a regular file
  }
  fs::remove_all(dir);
}
