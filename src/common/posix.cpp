// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/posix.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier {

Status posix_error(int err, std::string_view context) {
  ErrorCode code = ErrorCode::kIo;
  if (err == ENOSPC || err == EDQUOT) code = ErrorCode::kNoSpace;
  if (err == EACCES || err == EPERM || err == EROFS) code = ErrorCode::kPermission;
  if (err == ENOENT) code = ErrorCode::kNotFound;
  return Status(code, std::string(context), err);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() noexcept {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<UniqueFd> open_file(const std::string& path, int flags, mode_t mode) {
  if ((flags & O_CREAT) == 0) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) return fail(posix_error(errno, fmt::format("open {}", path)));
    return UniqueFd(fd);
  }
  // open() filters `mode` through the umask, so a file we create gets it again with fchmod. A file
  // that already exists keeps the mode its owner chose: O_EXCL tells the two cases apart.
  for (;;) {
    int fd = ::open(path.c_str(), flags | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0) {
      UniqueFd owner(fd);
      if (::fchmod(fd, mode) != 0) return fail(posix_error(errno, fmt::format("fchmod {}", path)));
      return owner;
    }
    if (errno != EEXIST || (flags & O_EXCL) != 0) {
      return fail(posix_error(errno, fmt::format("open {}", path)));
    }
    fd = ::open(path.c_str(), (flags & ~O_CREAT) | O_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    if (errno != ENOENT) return fail(posix_error(errno, fmt::format("open {}", path)));
    // Removed between the two calls: create it after all.
  }
}

Status pread_full(int fd, std::span<std::byte> buf, uint64_t offset) {
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n =
        ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return posix_error(errno, fmt::format("pread at {}", offset + done));
    if (n == 0) {
      return Status(ErrorCode::kCorrupt,
                    fmt::format("short read: end of file at {} (wanted {} more bytes)",
                                offset + done, buf.size() - done));
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Status pwrite_full(int fd, std::span<const std::byte> buf, uint64_t offset) {
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n =
        ::pwrite(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return posix_error(errno, fmt::format("pwrite at {}", offset + done));
    if (n == 0) return Status(ErrorCode::kIo, "pwrite wrote nothing");
    done += static_cast<size_t>(n);
  }
  return {};
}

Status fsync_dir(const std::string& dir) {
  KVTIER_ASSIGN_OR_RETURN(UniqueFd fd, open_file(dir, O_RDONLY | O_DIRECTORY));
  if (::fsync(fd.get()) != 0) return posix_error(errno, fmt::format("fsync {}", dir));
  return {};
}

Status write_file_atomic(const std::string& dir, const std::string& name,
                         std::span<const std::byte> bytes) {
  std::string tmp = fmt::format("{}/{}.tmp", dir, name);
  {
    KVTIER_ASSIGN_OR_RETURN(UniqueFd fd, open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC));
    KVTIER_TRY(pwrite_full(fd.get(), bytes, 0));
    if (::fdatasync(fd.get()) != 0) return posix_error(errno, fmt::format("fdatasync {}", tmp));
  }
  std::string final_path = fmt::format("{}/{}", dir, name);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    return posix_error(errno, fmt::format("rename {} -> {}", tmp, final_path));
  }
  return fsync_dir(dir);
}

Result<uint64_t> allocated_bytes(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(posix_error(errno, "fstat"));
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

Result<std::string> read_file(const std::string& path) {
  KVTIER_ASSIGN_OR_RETURN(UniqueFd fd, open_file(path, O_RDONLY));
  // Read to end of file rather than trusting the size: /proc and /sys files report 0 or 4096.
  std::string text;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(posix_error(errno, fmt::format("read {}", path)));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

uint64_t raise_open_file_limit(uint64_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    rlimit raised = limit;
    raised.rlim_cur =
        limit.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, limit.rlim_max);
    if (raised.rlim_cur > limit.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) == 0)
      limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace kvtier
