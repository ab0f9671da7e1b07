#include "gpuplan/app/file_write.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace gpuplan::app {

bool write_file_atomically(const std::string& path, const std::string& text, Diagnostics& diags,
                           const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A symbolic link is written through (the link stays and points at the new file), so resolve it first.
  fs::path target(path);
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    const fs::path real = fs::weakly_canonical(target, ec);
    if (ec) {
      diags.error(path, "", "cannot resolve the symbolic link: " + ec.message());
      return false;
    }
    target = real;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    diags.error(path, "", fs::is_directory(st) ? "is a folder; give a file name to write"
                                               : "is not a regular file (a device or a pipe); write to a file, or "
                                                 "leave the flag out and redirect stdout");
    return false;
  }
  for (const auto& in : inputs) {
    if (in.empty() || !fs::exists(in, ec) || !fs::exists(st)) continue;
    if (fs::equivalent(in, target, ec)) {
      diags.error(path, "", fmt::format("is the input file '{}'; writing there would replace it: give another path",
                                        in));
      return false;
    }
  }
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) {
    diags.error(path, "", "cannot create the folder: " + ec.message());
    return false;
  }
  // A fresh temporary name in the same folder (mkstemp: never an existing file or link), then rename over the target.
  std::string tmpl = target.string() + ".XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    const int e = errno;
    diags.error(path, "", fmt::format("cannot create a temporary file beside it: {}", std::strerror(e)));
    return false;
  }
  const fs::path tmp(tmpl);
  auto fail = [&](const std::string& why) {
    ::close(fd);
    fs::remove(tmp, ec);
    diags.error(path, "", why);
    return false;
  };
  // The permissions an ordinary file gets (mkstemp creates 0600), or those of the file being replaced.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  const mode_t mode = fs::exists(st) ? static_cast<mode_t>(st.permissions() & fs::perms::all)
                                     : static_cast<mode_t>(0666 & ~mask);
  if (::fchmod(fd, mode) != 0) return fail(fmt::format("cannot set the file's permissions: {}", std::strerror(errno)));
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(fmt::format("write failed: {}", std::strerror(n < 0 ? errno : EIO)));
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    const int e = errno;
    fs::remove(tmp, ec);
    diags.error(path, "", fmt::format("write failed: {}", std::strerror(e)));
    return false;
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    diags.error(path, "", "cannot replace the file: " + ec.message());
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace gpuplan::app
