// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// FileSystem::posix(): the seam's real implementation, plain POSIX calls.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/file_system.hpp"
#include "common/posix.hpp"

namespace kvtier {
namespace {

FileInfo info_of(const struct stat& st) {
  FileInfo info;
  info.directory = S_ISDIR(st.st_mode);
  info.size = static_cast<uint64_t>(st.st_size);
  info.allocated = static_cast<uint64_t>(st.st_blocks) * 512;
  info.links = static_cast<uint64_t>(st.st_nlink);
  info.device = static_cast<uint64_t>(st.st_dev);
  info.inode = static_cast<uint64_t>(st.st_ino);
  info.mtime = st.st_mtim;
  return info;
}

class PosixFile final : public File {
 public:
  PosixFile(std::string path, UniqueFd fd) : File(std::move(path)), fd_(std::move(fd)) {}

  int fd() const override { return fd_.get(); }
  Result<size_t> read(std::span<std::byte> buf, uint64_t offset) override {
    size_t done = 0;
    while (done < buf.size()) {
      const ssize_t n = ::pread(fd_.get(), buf.data() + done, buf.size() - done,
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return fail(posix_error(errno, fmt::format("pread {} at {}", path(), offset + done)));
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return done;
  }
  Status write_at(std::span<const std::byte> buf, uint64_t offset) override {
    return pwrite_full(fd_.get(), buf, offset).with_context(path());
  }
  Status sync() override {
    if (::fdatasync(fd_.get()) != 0) return posix_error(errno, "fdatasync " + path());
    return {};
  }
  Status truncate(uint64_t size) override {
    if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) {
      return posix_error(errno, fmt::format("truncating {} to {} bytes", path(), size));
    }
    return {};
  }
  Status allocate(uint64_t size) override {
    // posix_fallocate returns the error instead of setting errno.
    if (int rc = ::posix_fallocate(fd_.get(), 0, static_cast<off_t>(size)); rc != 0) {
      return posix_error(rc, fmt::format("preallocating {} bytes for {}", size, path()));
    }
    return {};
  }
  Result<FileInfo> stat() override {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) return fail(posix_error(errno, "fstat " + path()));
    return info_of(st);
  }
  Status try_lock(LockMode mode) override {
    const int op = (mode == LockMode::kShared ? LOCK_SH : LOCK_EX) | LOCK_NB;
    if (::flock(fd_.get(), op) != 0) return posix_error(errno, "locking " + path());
    return {};
  }
  void unlock() override { ::flock(fd_.get(), LOCK_UN); }

 private:
  UniqueFd fd_;
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> open(const std::string& path, int flags, mode_t mode) override {
    KVTIER_ASSIGN_OR_RETURN(UniqueFd fd, open_file(path, flags, mode));
    return std::unique_ptr<File>(new PosixFile(path, std::move(fd)));
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return posix_error(errno, fmt::format("rename {} -> {}", from, to));
    }
    return {};
  }
  Status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return posix_error(errno, "unlink " + path);
    return {};
  }
  Status make_dir(const std::string& path) override {
    // mkdir's mode passes through the umask: set again, KV is user data.
    if (::mkdir(path.c_str(), 0700) != 0) return posix_error(errno, "creating directory " + path);
    if (::chmod(path.c_str(), 0700) != 0) return posix_error(errno, "chmod " + path);
    return {};
  }
  Result<std::vector<std::string>> list_dir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return fail(posix_error(errno, "opendir " + dir));
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string_view name(e->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(d);
    return names;
  }
  Result<FileInfo> stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return fail(posix_error(errno, "stat " + path));
    return info_of(st);
  }
  Status sync_dir(const std::string& dir) override { return fsync_dir(dir); }
  Status check_writable(const std::string& path) override {
    // AT_EACCESS: the rights this process has (its effective ids), as open() will check them.
    if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0) {
      return posix_error(errno, path + " is not writable");
    }
    return {};
  }
  Result<uint64_t> free_bytes(const std::string& dir) override {
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) != 0) return fail(posix_error(errno, "statvfs " + dir));
    return uint64_t{vfs.f_bavail} * vfs.f_frsize;
  }
};

}  // namespace

const std::shared_ptr<FileSystem>& FileSystem::posix() {
  // Leaked on purpose: store files may still be closed by static destructors elsewhere.
  static const auto* fs = new std::shared_ptr<FileSystem>(std::make_shared<PosixFileSystem>());
  return *fs;
}

}  // namespace kvtier
