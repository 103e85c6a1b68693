// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Makes a directory and the files in it read-only for this process and its children, the way a
// drive remounted read-only is, by the first of these that works here:
//   - a read-only bind mount over the directory (needs CAP_SYS_ADMIN): opens for writing fail with
//     EROFS, as on a file system remounted read-only; files already open stay writable
//   - as an unprivileged user, no write permission on the directory and its files (EACCES)
//   - as root without CAP_SYS_ADMIN, the immutable attribute (EPERM; needs CAP_LINUX_IMMUTABLE
//     and a file system that has it, such as ext4)
// Undone when it goes out of scope.
#pragma once

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace kvtier::testing {

class ReadOnlyDir {
 public:
  enum class How { kNone, kBindMount, kPermissions, kImmutable };

  explicit ReadOnlyDir(std::string dir) : dir_(std::move(dir)) {
    if (::mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND, nullptr) == 0) {
      if (::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0) {
        how_ = How::kBindMount;
        return;
      }
      why_ = std::strerror(errno);
      ::umount2(dir_.c_str(), MNT_DETACH);
    } else {
      why_ = std::string("bind mount: ") + std::strerror(errno);
    }
    if (::geteuid() != 0) {
      for_each([](const std::filesystem::path& p, bool dir) {
        ::chmod(p.c_str(), dir ? 0500 : 0400);
        return true;
      });
      how_ = How::kPermissions;
      return;
    }
    if (for_each([](const std::filesystem::path& p, bool) { return set_immutable(p, true); })) {
      how_ = How::kImmutable;
      return;
    }
    why_ += std::string("; immutable attribute: ") + std::strerror(errno);
    undo();
  }
  ~ReadOnlyDir() { undo(); }
  ReadOnlyDir(const ReadOnlyDir&) = delete;
  ReadOnlyDir& operator=(const ReadOnlyDir&) = delete;

  /// Whether the directory is read-only now; if not, why() says what was tried.
  [[nodiscard]] bool ok() const { return how_ != How::kNone; }
  [[nodiscard]] How how() const { return how_; }
  [[nodiscard]] const std::string& why() const { return why_; }

  /// Makes it writable again (idempotent).
  void undo() {
    switch (how_) {
      case How::kBindMount:
        ::umount2(dir_.c_str(), MNT_DETACH);
        break;
      case How::kPermissions:
        for_each([](const std::filesystem::path& p, bool dir) {
          ::chmod(p.c_str(), dir ? 0700 : 0600);
          return true;
        });
        break;
      case How::kImmutable:
      case How::kNone:
        // Cleared even when setting failed part way, so nothing is left immutable.
        for_each([](const std::filesystem::path& p, bool) {
          set_immutable(p, false);
          return true;
        });
        break;
    }
    how_ = How::kNone;
  }

 private:
  static bool set_immutable(const std::filesystem::path& p, bool on) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    int flags = 0;
    bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    if (ok) {
      flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
      ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    }
    const int err = errno;
    ::close(fd);
    errno = err;
    return ok;
  }
  /// Calls f(path, is_dir) on the files first and the directory last; false if any call was.
  template <typename F>
  bool for_each(F f) const {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) files.push_back(e.path());
    bool ok = true;
    for (const auto& p : files) ok = f(p, std::filesystem::is_directory(p)) && ok;
    return f(dir_, true) && ok;
  }

  std::string dir_;
  How how_ = How::kNone;
  std::string why_;
};

}  // namespace kvtier::testing
