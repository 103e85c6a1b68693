// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A store on a file system that fills up: a small tmpfs mounted for the test (skipped where this
// process may not mount one). A save the full disk failed leaves nothing behind, now or after a
// reopen; a capacity larger than the file system makes room by evicting the least recently used
// segments; a save that cannot fit even then is refused with the numbers, evicting nothing.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "store/index_log.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;
constexpr uint64_t kMiB = uint64_t{1} << 20;

class StoreFullDiskTest : public ::testing::Test {
 protected:
  /// Mounts a tmpfs of `mib` MiB for the store; false (the test skips) where it may not.
  bool mount_small_fs(uint64_t mib) {
    fs::create_directories(mount_);
    if (::mount("tmpfs", mount_.c_str(), "tmpfs", 0, fmt::format("size={}m", mib).c_str()) != 0) {
      why_ = std::strerror(errno);
      return false;
    }
    mounted_ = true;
    return true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mount_.c_str(), MNT_DETACH);
  }
  Options options(uint64_t segment_bytes) const {
    Options o = testing::small_options((mount_ / "store").string(), g_);
    o.capacity_bytes = uint64_t{1} << 30;  // far more than the file system holds
    o.segment_bytes = segment_bytes;
    return o;
  }
  std::string rank_dir() const { return (mount_ / "store" / "rank0of1").string(); }
  Status save(Engine& e, std::span<const Token> tokens) {
    return testing::save_synthetic(e, g_, tokens);
  }
  /// Restores, checks every restored byte, and returns how many tokens came back.
  uint64_t restored_exact(Engine& e, std::span<const Token> tokens) {
    return testing::restored_exact(e, g_, tokens);
  }
  /// Fills what is left of the file system with a file of its own.
  void fill_up() {
    std::ofstream filler(mount_ / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) &&
           filler.flush()) {
    }
  }
  uint64_t free_bytes() const {
    struct statvfs vfs {};
    ::statvfs(mount_.c_str(), &vfs);
    return uint64_t{vfs.f_bavail} * vfs.f_frsize;
  }

  testing::TempDir dir_;
  fs::path mount_ = dir_.path() / "fs";
  bool mounted_ = false;
  std::string why_;
  KvGeometry g_ = testing::tiny_geometry();
};

#define MOUNT_OR_SKIP(mib)                                                                   \
  if (!mount_small_fs(mib)) {                                                                \
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << why_ << "); needs CAP_SYS_ADMIN"; \
  }

// The disk fills while a save's index entries are appended: the append stops part way (the
// journal's last page had room for some entries, the file system none for another page). The save
// fails; none of its chunks may be found, in this engine or after a reopen.
TEST_F(StoreFullDiskTest, SaveFailedByAFullDiskIsInvisibleNowAndAfterReopen) {
  MOUNT_OR_SKIP(64);
  const uint64_t seed = testing::test_seed();
  const auto first = synthetic::tokens(seed, 2000);
  const auto failed = synthetic::tokens(seed + 1, 1000);  // 4 records: 3 whole chunks and 232
  std::vector<std::vector<Token>> small;
  const std::string journal = rank_dir() + "/" + IndexLog::kJournalName;
  {
    auto e = Engine::open(options(16 * kMiB));
    ASSERT_OK(e);
    ASSERT_OK(save(**e, first));
    // A save appends a use of its segment and then one entry per record. Saves of one token move
    // the journal's end until its last page has room for the use and one to three of the four
    // records' entries of the save to come, and no more.
    const uint64_t use = journal_entry_bytes(JournalOp::kUse);
    const uint64_t add = journal_entry_bytes(JournalOp::kAdd);
    auto slack = [&] {
      const uint64_t size = fs::file_size(journal);
      return size % 4096 == 0 ? 0 : 4096 - size % 4096;
    };
    for (int i = 0; i < 400 && !(slack() >= use + add && slack() < use + 4 * add); ++i) {
      small.push_back(synthetic::tokens(seed + 100 + small.size(), 1));
      ASSERT_OK(save(**e, small.back()));
    }
    ASSERT_TRUE(slack() >= use + add && slack() < use + 4 * add) << slack();
    fill_up();
    ASSERT_EQ(free_bytes(), 0u);
    const Status st = save(**e, failed);
    ASSERT_FALSE(st.ok()) << "the save fit after all";
    EXPECT_EQ(st.code(), ErrorCode::kNoSpace) << st.to_string();
    EXPECT_EQ((*e)->lookup(failed).value_or(1), 0u);
  }
  fs::remove(mount_ / "filler");
  auto e = Engine::open(options(16 * kMiB));
  ASSERT_OK(e);
  EXPECT_EQ((*e)->lookup(failed).value_or(1), 0u)
      << "chunks of the failed save came back after a reopen";
  EXPECT_EQ(restored_exact(**e, first), first.size());
  for (const auto& s : small) EXPECT_EQ(restored_exact(**e, s), s.size());
  ASSERT_OK(save(**e, failed));
  EXPECT_EQ(restored_exact(**e, failed), failed.size());
  auto report = (*e)->verify({});
  ASSERT_OK(report);
  EXPECT_EQ(report->corrupt_records, 0u);
}

// A capacity far above what the file system holds: when it is full, the least recently used
// segments are evicted to make room, and saves go on. A session restored after every save stays.
TEST_F(StoreFullDiskTest, FileSystemSmallerThanTheCapacityEvictsTheLeastRecentlyUsed) {
  MOUNT_OR_SKIP(64);
  std::mt19937_64 rng(testing::test_seed());
  auto e = Engine::open(options(8 * kMiB));
  ASSERT_OK(e);
  const auto kept = synthetic::tokens(rng(), 3000);
  ASSERT_OK(save(**e, kept));
  std::vector<std::vector<Token>> all;
  for (int i = 0; i < 40; ++i) {  // ~110 MB in all, on 64 MiB
    all.push_back(synthetic::tokens(rng(), 1500 + rng() % 2500));
    const Status st = save(**e, all.back());
    ASSERT_TRUE(st.ok()) << "save " << i << ": " << st.to_string();
    ASSERT_EQ(restored_exact(**e, kept), kept.size())
        << "the most recently used session, save " << i;
  }
  EXPECT_GT((*e)->stats().evicted_segments, 0u);
  // The newest sessions are whole; older ones are whole, a verified prefix, or gone.
  for (size_t i = all.size() - 4; i < all.size(); ++i)
    EXPECT_EQ(restored_exact(**e, all[i]), all[i].size()) << "session " << i;
  for (const auto& s : all) restored_exact(**e, s);
  auto report = (*e)->verify({});
  ASSERT_OK(report);
  EXPECT_EQ(report->corrupt_records, 0u);
}

// A save larger than the whole file system: refused with what is free, what it needs and what to
// do, before anything is evicted.
TEST_F(StoreFullDiskTest, SaveLargerThanTheFileSystemIsRefusedWithTheNumbersEvictingNothing) {
  MOUNT_OR_SKIP(32);
  const uint64_t seed = testing::test_seed();
  auto e = Engine::open(options(8 * kMiB));
  ASSERT_OK(e);
  const auto a = synthetic::tokens(seed, 3000);
  const auto b = synthetic::tokens(seed + 1, 3000);
  ASSERT_OK(save(**e, a));
  ASSERT_OK(save(**e, b));
  const auto huge = synthetic::tokens(seed + 2, 40000);  // 40 MB
  const Status st = save(**e, huge);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kNoSpace) << st.to_string();
  EXPECT_NE(st.message().find("free"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("--capacity"), std::string::npos) << st.to_string();
  EXPECT_EQ((*e)->stats().evicted_segments, 0u);
  EXPECT_EQ(restored_exact(**e, a), a.size());
  EXPECT_EQ(restored_exact(**e, b), b.size());
}

}  // namespace
}  // namespace kvtier
