// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Who may touch a store: the modes of what kvtier creates, stores on media we may only read, and
// options that contradict what the store was created with.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

class StoreAccessTest : public ::testing::Test {
 protected:
  Options options() const { return testing::small_options((dir_.path() / "store").string(), g_); }
  Result<SaveResult> save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    return e.save(tokens, kv.view);
  }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
};

/// Sets the process umask for one scope.
class UmaskScope {
 public:
  explicit UmaskScope(mode_t mask) : old_(::umask(mask)) {}
  ~UmaskScope() { ::umask(old_); }
  UmaskScope(const UmaskScope&) = delete;
  UmaskScope& operator=(const UmaskScope&) = delete;

 private:
  mode_t old_;
};

// KV is user data: whatever the umask, the directories kvtier makes are 0700 and its files 0600.
TEST_F(StoreAccessTest, StoreFilesArePrivateWhateverTheUmask) {
  for (mode_t mask : {mode_t{000}, mode_t{022}, mode_t{077}}) {
    SCOPED_TRACE(::testing::Message() << "umask 0" << std::oct << mask);
    testing::TempDir dir;
    const fs::path root = dir.path() / "store";
    Options o = testing::small_options(root.string(), g_);
    {
      UmaskScope scope(mask);
      for (int round = 0; round < 2; ++round) {  // the second open rewrites the checkpoint
        auto e = Engine::open(o);
        ASSERT_OK(e);
        ASSERT_OK(save(**e, synthetic::tokens(10 + round, 3000)));
        ASSERT_OK((*e)->evict(synthetic::tokens(10 + round, 3000)));
        ASSERT_OK(save(**e, synthetic::tokens(20 + round, 1000)));
      }
    }
    size_t files = 0;
    auto check = [&](const fs::path& p) {
      struct stat st {};
      ASSERT_EQ(::lstat(p.c_str(), &st), 0) << p;
      const mode_t want = S_ISDIR(st.st_mode) ? 0700 : 0600;
      EXPECT_EQ(st.st_mode & 07777, want) << p << " is 0" << std::oct << (st.st_mode & 07777);
      files += S_ISREG(st.st_mode);
    };
    check(root);
    for (const auto& entry : fs::recursive_directory_iterator(root)) check(entry.path());
    EXPECT_GE(files, 5u);  // LOCK, MANIFEST.json, index.ckpt, index.journal, a segment
  }
}

// A store keeps the segment size it was created with. Asking for another one (the option or
// KVTIER_SEGMENT_BYTES) is refused by name; leaving it unset takes the store's.
TEST_F(StoreAccessTest, SegmentSizeOtherThanTheStoresIsRefusedNamingBoth) {
  Options o = options();  // 16 MiB segments
  {
    auto e = Engine::open(o);
    ASSERT_OK(e);
    ASSERT_OK(save(**e, synthetic::tokens(1, 1000)));
  }
  Options other = o;
  other.segment_bytes = uint64_t{8} << 20;
  auto refused = Engine::open(other);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("16777216"), std::string::npos)
      << refused.error().to_string();
  EXPECT_NE(refused.error().message().find("8388608"), std::string::npos)
      << refused.error().to_string();

  Options unset = o;
  unset.segment_bytes = 0;
  {
    auto e = Engine::open(unset);
    ASSERT_OK(e);
    EXPECT_EQ((*e)->stats().segment_bytes, uint64_t{16} << 20);
  }
  ::setenv("KVTIER_SEGMENT_BYTES", "8388608", 1);
  auto from_env = Engine::open(unset);
  ::unsetenv("KVTIER_SEGMENT_BYTES");
  ASSERT_FALSE(from_env.has_value());
  EXPECT_EQ(from_env.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(from_env.error().message().find("KVTIER_SEGMENT_BYTES"), std::string::npos)
      << from_env.error().to_string();

  auto same = Engine::open(o);  // the size it was made with
  ASSERT_OK(same);
}

/// A store seen read-only: through a read-only bind mount of its root at another path when we are
/// root (chmod does not stop root), else its own tree made unwritable with chmod. `skip` says why
/// neither could be done.
class ReadOnlyView {
 public:
  ReadOnlyView(const fs::path& root, const fs::path& mount_point) : root_(root) {
    if (::getuid() != 0) {
      for (const auto& entry : fs::recursive_directory_iterator(root)) chmod_minus_w(entry.path());
      chmod_minus_w(root);
      path = root;
      chmodded_ = true;
      return;
    }
    fs::create_directories(mount_point);
    if (::mount(root.c_str(), mount_point.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      skip = std::string("cannot bind-mount as root here: ") + std::strerror(errno);
      return;
    }
    mounted_ = mount_point;
    if (::mount(nullptr, mount_point.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) !=
        0) {
      skip = std::string("cannot make a bind mount read-only here: ") + std::strerror(errno);
      return;
    }
    path = mount_point;
  }
  ~ReadOnlyView() {
    if (!mounted_.empty()) ::umount2(mounted_.c_str(), MNT_DETACH);
    if (chmodded_) {
      ::chmod(root_.c_str(), 0700);
      for (const auto& entry : fs::recursive_directory_iterator(root_))
        ::chmod(entry.path().c_str(), 0700);
    }
  }
  ReadOnlyView(const ReadOnlyView&) = delete;
  ReadOnlyView& operator=(const ReadOnlyView&) = delete;

  fs::path path;
  std::string skip;

 private:
  static void chmod_minus_w(const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) ::chmod(p.c_str(), st.st_mode & 07555);
  }
  fs::path root_;
  fs::path mounted_;
  bool chmodded_ = false;
};

/// Every file under `dir` with its size and modification time, to show nothing was written.
std::map<std::string, std::pair<uintmax_t, int64_t>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, int64_t>> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    ::lstat(entry.path().c_str(), &st);
    out[entry.path().string()] = {static_cast<uintmax_t>(st.st_size),
                                  st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

// A store on media we may only read: lookups, restores and stats are served under a shared lock,
// saves and evictions are refused by name, nothing is written (not even recency), and a writer is
// kept out while the reader is open.
TEST_F(StoreAccessTest, ReadOnlyStoreIsServedAndNeverWritten) {
  const auto a = synthetic::tokens(40, 3000);
  const auto b = synthetic::tokens(41, 700);
  const fs::path root = dir_.path() / "store";
  {
    auto e = Engine::open(options());
    ASSERT_OK(e);
    ASSERT_OK(save(**e, a));
    ASSERT_OK(save(**e, b));
  }
  const auto before = snapshot(root);
  ReadOnlyView view(root, dir_.path() / "ro");
  if (!view.skip.empty()) GTEST_SKIP() << view.skip;
  Options ro = testing::small_options(view.path.string(), g_);
  ro.create_if_missing = false;
  {
    auto e = Engine::open(ro);
    ASSERT_OK(e);
    Engine& reader = **e;
    EXPECT_EQ(reader.lookup(a).value_or(0), a.size());
    HostKv out(g_, a.size());
    auto r = reader.restore(a, out.view);
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, a.size());
    EXPECT_EQ(synthetic::first_mismatch(g_, a, out.span(), a.size()), a.size());
    EXPECT_EQ(reader.stats().records, (a.size() + 255) / 256 + (b.size() + 255) / 256);
    auto verified = reader.verify();
    ASSERT_OK(verified);
    EXPECT_EQ(verified->corrupt_records, 0u);

    auto saved = save(reader, synthetic::tokens(42, 500));
    ASSERT_FALSE(saved.has_value());
    EXPECT_EQ(saved.error().code(), ErrorCode::kPermission);
    EXPECT_NE(saved.error().message().find("store opened read-only"), std::string::npos)
        << saved.error().to_string();
    auto evicted = reader.evict(b);
    ASSERT_FALSE(evicted.has_value());
    EXPECT_EQ(evicted.error().code(), ErrorCode::kPermission);
    EXPECT_NE(evicted.error().message().find("store opened read-only"), std::string::npos)
        << evicted.error().to_string();
    EXPECT_EQ(reader.lookup(b).value_or(0), b.size());

    if (view.path != root) {  // the writable path to the same store: a writer must wait
      auto writer = Engine::open(options());
      ASSERT_FALSE(writer.has_value());
      EXPECT_EQ(writer.error().code(), ErrorCode::kLocked);
      EXPECT_NE(writer.error().message().find("read-only"), std::string::npos)
          << writer.error().to_string();
    }
  }
  EXPECT_EQ(snapshot(root), before) << "a read-only open wrote to the store";
  if (view.path != root) {
    auto writer = Engine::open(options());  // the reader is gone
    ASSERT_OK(writer);
    auto reader = Engine::open(ro);  // and now a reader must wait
    ASSERT_FALSE(reader.has_value());
    EXPECT_EQ(reader.error().code(), ErrorCode::kLocked);
  }
}

// verify on a read-only store finds a corrupt record but may not drop it: a clear error.
TEST_F(StoreAccessTest, VerifyOnAReadOnlyStoreRefusesToDropWhatItFinds) {
  const auto a = synthetic::tokens(43, 1000);
  const fs::path root = dir_.path() / "store";
  {
    auto e = Engine::open(options());
    ASSERT_OK(e);
    ASSERT_OK(save(**e, a));
  }
  {
    std::fstream f(root / "rank0of1" / "seg-00000001.kvt",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 123);
    f.put('\x5a');
  }
  ReadOnlyView view(root, dir_.path() / "ro");
  if (!view.skip.empty()) GTEST_SKIP() << view.skip;
  auto e = Engine::open(testing::small_options(view.path.string(), g_));
  ASSERT_OK(e);
  auto report = (*e)->verify();
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().code(), ErrorCode::kPermission);
  EXPECT_NE(report.error().message().find("store opened read-only"), std::string::npos)
      << report.error().to_string();
}

}  // namespace
}  // namespace kvtier
