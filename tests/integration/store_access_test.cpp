// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Who may touch a store: the modes of what kvtier creates, stores on media we may only read, and
// options that contradict what the store was created with.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

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
      struct stat st{};
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
  { auto e = Engine::open(o); ASSERT_OK(e); ASSERT_OK(save(**e, synthetic::tokens(1, 1000))); }
  Options other = o;
  other.segment_bytes = uint64_t{8} << 20;
  auto refused = Engine::open(other);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("16777216"), std::string::npos) << refused.error().to_string();
  EXPECT_NE(refused.error().message().find("8388608"), std::string::npos) << refused.error().to_string();

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

}  // namespace
}  // namespace kvtier
