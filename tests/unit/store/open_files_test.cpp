// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A store keeps every segment file open: opening one raises the process's soft limit on open files
// to what the store holds when full, and says so plainly where the hard limit is lower. Each case
// runs in a child process, whose limits it may lower without touching the other tests'.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "store/store.hpp"
#include "store_util.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

/// Runs `body` in a child process; its exit status (0: every check held).
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

Options big_store(const std::string& root) {
  Options o = testing::small_options(root, testing::tiny_geometry());
  o.capacity_bytes = uint64_t{16} << 30;  // 1,024 segments of 16 MiB when full
  o.segment_bytes = 16 * kMiB;
  return *o.resolved();
}

TEST(StoreOpenFiles, OpeningAStoreRaisesTheSoftLimitToWhatItHoldsWhenFull) {
  testing::TempDir dir;
  const int status = in_child([&] {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 2048) return 0;  // cannot be shown here
    limit.rlim_cur = 64;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 2;
    Logger log{LogSink{}, LogLevel::kOff};
    auto store = Store::open(testing::store_config(big_store(dir.str())), log);
    if (!store) return 3;
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return limit.rlim_cur >= 1024 + 8 ? 0 : 4;
  });
  EXPECT_EQ(status, 0) << "2: setrlimit, 3: open failed, 4: soft limit not raised";
}

TEST(StoreOpenFiles, AHardLimitBelowWhatAFullStoreHoldsIsSaidAtOpen) {
  testing::TempDir dir;
  const int status = in_child([&] {
    rlimit limit{300, 300};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 2;
    std::atomic<bool> warned{false};
    Logger log{LogSink{[&](LogLevel level, std::string_view line) {
                 if (level == LogLevel::kWarn && line.find("RLIMIT_NOFILE") != line.npos &&
                     line.find("300") != line.npos)
                   warned = true;
               }},
               LogLevel::kWarn};
    auto store = Store::open(testing::store_config(big_store(dir.str())), log);
    if (!store) return 3;  // a warning, not a refusal: a store that never fills is fine
    return warned ? 0 : 4;
  });
  EXPECT_EQ(status, 0) << "2: setrlimit, 3: open failed, 4: no warning naming the limit";
}

}  // namespace
}  // namespace kvtier
