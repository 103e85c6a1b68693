// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Faults injected through the I/O engine interface into a real store: EIO on read and on write,
// ENOSPC mid-segment, short transfers, torn writes followed by a crash and an index rebuild;
// and what the OS refuses: a store directory we may not enter, a store of another format version.
// Each ends in a clean Status or a miss; nothing acknowledged is lost; nothing wrong is served.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fault_engine.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::Fault;
using testing::FaultScope;
using testing::HostKv;

class FaultInjectionTest : public ::testing::Test {
 protected:
  Options options() const { return testing::small_options(dir_.str(), g_); }
  std::unique_ptr<Engine> open() {
    auto e = Engine::open(options());
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  Result<SaveResult> save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    return e.save(tokens, kv.view);
  }
  /// Restores and checks every restored byte; returns how many tokens came back.
  uint64_t restored_exact(Engine& e, std::span<const Token> tokens, RestoreResult* out = nullptr) {
    return testing::restored_exact(e, g_, tokens, out);
  }
  /// Forces the next open to rebuild the index from the segments' record headers.
  void drop_index() const {
    fs::remove(dir_.path() / "rank0of1" / "index.ckpt");
    fs::remove(dir_.path() / "rank0of1" / "index.journal");
  }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
  std::vector<Token> a_ = synthetic::tokens(301, 3000);
  std::vector<Token> b_ = synthetic::tokens(302, 3000);
};

// Half of a request, in whole 4 KiB blocks (O_DIRECT transfers must stay aligned).
uint32_t half(const IoRequest& r) { return r.length / 2 / 4096 * 4096; }

TEST_F(FaultInjectionTest, EioOnWriteFailsTheSaveAndLosesNothingAcknowledged) {
  auto e = open();
  ASSERT_OK(save(*e, a_));
  {
    FaultScope faults([](const IoRequest& r, uint64_t) { return Fault{r.write, 0, -EIO}; });
    auto saved = save(*e, b_);
    ASSERT_FALSE(saved);
    EXPECT_EQ(saved.error().code(), ErrorCode::kIo) << saved.error().to_string();
  }
  EXPECT_EQ(restored_exact(*e, a_), a_.size());
  EXPECT_EQ(e->lookup(b_).value(), 0u);  // never acknowledged, never visible
  e.reset();
  e = open();
  EXPECT_EQ(restored_exact(*e, a_), a_.size());
  EXPECT_EQ(restored_exact(*e, b_), 0u);
  auto report = e->verify();
  ASSERT_OK(report);
  EXPECT_EQ(report->corrupt_records, 0u);
  ASSERT_OK(save(*e, b_));  // the store still takes writes
  EXPECT_EQ(restored_exact(*e, b_), b_.size());
}

TEST_F(FaultInjectionTest, EnospcMidSegmentIsNoSpaceAndTheStoreStaysUsable) {
  auto e = open();
  ASSERT_OK(save(*e, a_));
  {
    FaultScope faults([](const IoRequest& r, uint64_t call) {
      return Fault{r.write && call >= 2, 0, -ENOSPC};
    });
    auto saved = save(*e, b_);
    ASSERT_FALSE(saved);
    EXPECT_EQ(saved.error().code(), ErrorCode::kNoSpace) << saved.error().to_string();
  }
  EXPECT_EQ(restored_exact(*e, a_), a_.size());
  EXPECT_EQ(e->lookup(b_).value(), 0u);
  ASSERT_OK(save(*e, b_));
  EXPECT_EQ(restored_exact(*e, b_), b_.size());
}

TEST_F(FaultInjectionTest, TornWriteThenCrashAndRebuildServesNothingWrong) {
  {
    auto e = open();
    ASSERT_OK(save(*e, a_));
    // The second write request of B reaches the disk only in part, then the device fails, as if
    // the power went: B was never acknowledged.
    FaultScope faults([](const IoRequest& r, uint64_t call) {
      return r.write && call == 1 ? Fault{true, half(r), -EIO} : Fault{};
    });
    ASSERT_FALSE(save(*e, b_));
  }
  drop_index();  // recover from what the segments say
  auto e = open();
  EXPECT_GE(e->stats().recovered_records, (a_.size() + 255) / 256);
  EXPECT_EQ(restored_exact(*e, a_), a_.size());
  RestoreResult rb;
  restored_exact(*e, b_, &rb);  // whatever of B came back is byte-exact (checked inside)
  auto report = e->verify();
  ASSERT_OK(report);
  EXPECT_EQ(restored_exact(*e, a_), a_.size());
}

TEST_F(FaultInjectionTest, LostIndexFilesAreRebuiltNotTakenForAnEmptyStore) {
  for (const char* lost : {"index.ckpt", "index.journal"}) {
    SCOPED_TRACE(lost);
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g_);
    {
      auto e = Engine::open(o);
      ASSERT_OK(e);
      ASSERT_OK(save(**e, a_));
    }
    {  // a second open checkpoints A; B then lives in the journal only
      auto e = Engine::open(o);
      ASSERT_OK(e);
      ASSERT_OK(save(**e, b_));
    }
    fs::remove(dir.path() / "rank0of1" / lost);
    auto e = Engine::open(o);
    ASSERT_OK(e);
    EXPECT_EQ(restored_exact(**e, a_), a_.size());
    EXPECT_EQ(restored_exact(**e, b_), b_.size());
  }
}

TEST_F(FaultInjectionTest, EioOnReadIsAMissThatDropsNothing) {
  auto e = open();
  ASSERT_OK(save(*e, a_));
  RestoreResult r;
  {
    FaultScope faults([](const IoRequest& req, uint64_t call) {
      return Fault{!req.write && call >= 1, 0, -EIO};
    });
    const uint64_t got = restored_exact(*e, a_, &r);
    EXPECT_LT(got, a_.size());
    EXPECT_FALSE(r.problem.empty());
    EXPECT_EQ(r.checksum_misses, 0u);  // an I/O error is no evidence against the records
  }
  EXPECT_EQ(restored_exact(*e, a_), a_.size());  // all still there
}

TEST_F(FaultInjectionTest, ShortTransfersAreResumedOnBothPaths) {
  FaultScope faults([](const IoRequest& r, uint64_t) {
    const uint32_t h = half(r);
    return h > 0 ? Fault{true, h, h} : Fault{};
  });
  auto e = open();
  ASSERT_OK(save(*e, a_));
  EXPECT_EQ(restored_exact(*e, a_), a_.size());
  EXPECT_GT(faults.calls(), 0u);
}

TEST_F(FaultInjectionTest, StoreDirectoryWeMayNotEnterIsAPermissionError) {
  const fs::path locked = dir_.path() / "locked";
  fs::create_directories(locked);
  ::chmod(locked.c_str(), 0700);
  // Run the open as an unprivileged user, so the check holds when the tests run as root.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    if (::access(locked.c_str(), W_OK) == 0) ::_exit(11);  // not refused: nothing to test
    Options o = testing::small_options((locked / "store").string(), g_);
    auto e = Engine::open(o);
    if (e) ::_exit(12);
    ::_exit(e.error().code() == ErrorCode::kPermission ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11)
    GTEST_SKIP() << "cannot drop privileges here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "12: opened anyway; 13: another error code";
}

// A store another user keeps private (root's 0700 directory opened by nobody, or a directory we
// may not search): opening it, even only to read, is a permission error naming the path, never
// "no store".
TEST_F(FaultInjectionTest, StoreWeMayNotReachIsAPermissionErrorNamingThePath) {
  const fs::path locked = dir_.path() / "private";
  const std::string root = (locked / "store").string();
  fs::create_directories(locked);
  {
    auto e = Engine::open(testing::small_options(root, g_));
    ASSERT_OK(e);
    ASSERT_OK(save(**e, a_));
  }
  const bool as_root = ::getuid() == 0;
  ::chmod(locked.c_str(), as_root ? 0700 : 0000);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (as_root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    if (::access(locked.c_str(), X_OK) == 0) ::_exit(11);  // not refused: nothing to test
    for (bool create : {false, true}) {
      Options o = testing::small_options(root, g_);
      o.create_if_missing = create;
      auto e = Engine::open(o);
      if (e) ::_exit(12);
      if (e.error().code() != ErrorCode::kPermission) ::_exit(13);
      if (e.error().message().find(root) == std::string::npos) ::_exit(14);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::chmod(locked.c_str(), 0700);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11)
    GTEST_SKIP() << "cannot drop privileges here";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "12: opened anyway; 13: another error code; 14: the path is not named";
}

TEST_F(FaultInjectionTest, StoreOfAnotherFormatVersionIsRefusedByName) {
  {
    auto e = open();
    ASSERT_OK(save(*e, a_));
  }
  const fs::path manifest = dir_.path() / "rank0of1" / "MANIFEST.json";
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("\"format_version\"");
  ASSERT_NE(at, std::string::npos);
  const auto colon = text.find(':', at);
  const auto end = text.find_first_of(",}", colon);
  text.replace(colon + 1, end - colon - 1, " 999");
  std::ofstream(manifest) << text;
  auto e = Engine::open(options());
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), ErrorCode::kFormatVersion);
  EXPECT_NE(e.error().message().find("999"), std::string::npos) << e.error().to_string();
}

}  // namespace
}  // namespace kvtier
