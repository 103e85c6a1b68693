// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The fault-injecting file system the crash tests stand on: what a simulated power cut keeps and
// loses, and the faults it injects.
#include "fault_file_system.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/file_system.hpp"
#include "test_util.hpp"

namespace kvtier::testing {
namespace {

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s)); }

class FaultFileSystemTest : public ::testing::Test {
 protected:
  std::string path(const char* name) const { return dir_.str() + "/" + name; }
  std::string content(const char* name) {
    auto text = read_file(*FileSystem::posix(), path(name));
    return text ? *text : "<missing>";
  }
  /// A file whose name and content are durable.
  void durable(const char* name, std::string_view text) {
    auto f = fs_.open(path(name), O_RDWR | O_CREAT);
    ASSERT_OK(f);
    ASSERT_OK((*f)->write_at(bytes(text), 0));
    ASSERT_OK((*f)->sync());
    ASSERT_OK(fs_.sync_dir(dir_.str()));
  }

  TempDir dir_;
  FaultFileSystem fs_{7};
};

TEST_F(FaultFileSystemTest, CrashRevertsWritesSinceTheLastSync) {
  durable("a", "synced");
  auto f = fs_.open(path("a"), O_RDWR);
  ASSERT_OK(f);
  ASSERT_OK((*f)->write_at(bytes("SYNCED and more"), 0));
  EXPECT_EQ(content("a"), "SYNCED and more");  // the page cache has it
  fs_.crash();
  EXPECT_FALSE((*f)->write_at(bytes("x"), 0).ok());
  f->reset();
  fs_.recover();
  EXPECT_EQ(content("a"), "synced");
}

TEST_F(FaultFileSystemTest, CrashLosesACreationNoDirectorySyncMadeDurable) {
  auto f = fs_.open(path("new"), O_RDWR | O_CREAT);
  ASSERT_OK(f);
  ASSERT_OK((*f)->write_at(bytes("data"), 0));
  ASSERT_OK((*f)->sync());  // the data, not the name
  f->reset();
  fs_.crash();
  fs_.recover();
  EXPECT_EQ(content("new"), "<missing>");
}

TEST_F(FaultFileSystemTest, CrashUndoesRenameAndRemoveNoDirectorySyncMadeDurable) {
  durable("old", "old content");
  durable("tmp", "new content");
  durable("gone", "still here");
  ASSERT_OK(fs_.rename(path("tmp"), path("old")));
  ASSERT_OK(fs_.remove(path("gone")));
  EXPECT_EQ(content("old"), "new content");
  fs_.crash();
  fs_.recover();
  EXPECT_EQ(content("old"), "old content");
  EXPECT_EQ(content("tmp"), "new content");
  EXPECT_EQ(content("gone"), "still here");
  // Synced, they last.
  ASSERT_OK(fs_.rename(path("tmp"), path("old")));
  ASSERT_OK(fs_.sync_dir(dir_.str()));
  fs_.crash();
  fs_.recover();
  EXPECT_EQ(content("old"), "new content");
  EXPECT_EQ(content("tmp"), "<missing>");
}

TEST_F(FaultFileSystemTest, CrashAfterCountsMutatingCallsAndStopsEverythingAfter) {
  durable("a", "0123456789");
  auto f = fs_.open(path("a"), O_RDWR);
  ASSERT_OK(f);
  fs_.crash_after(2);
  ASSERT_OK((*f)->write_at(bytes("AB"), 0));
  Status cut = (*f)->sync();
  EXPECT_EQ(cut.native_error(), EIO);
  EXPECT_TRUE(fs_.crashed());
  EXPECT_EQ(fs_.crash_point(), "sync a");
  EXPECT_FALSE(fs_.stat(path("a")).has_value());
  f->reset();
  fs_.recover();
  EXPECT_EQ(content("a"), "0123456789");
}

TEST_F(FaultFileSystemTest, InjectsErrorsOnTheNthMatchingCallAndShortWrites) {
  durable("journal", "");
  auto f = fs_.open(path("journal"), O_RDWR);
  ASSERT_OK(f);
  fs_.add_fault(
      {.op = FsOp::kWrite, .path_part = "journal", .nth = 2, .error = ENOSPC, .written = 3});
  ASSERT_OK((*f)->write_at(bytes("first"), 0));
  Status st = (*f)->write_at(bytes("second"), 5);
  EXPECT_EQ(st.code(), ErrorCode::kNoSpace);
  EXPECT_NE(st.to_string().find("injected"), std::string::npos);
  EXPECT_EQ(content("journal"), "firstsec");     // three bytes landed
  ASSERT_OK((*f)->write_at(bytes("third"), 8));  // only the nth failed
  fs_.add_fault({.op = FsOp::kSync, .error = EIO});
  EXPECT_EQ((*f)->sync().native_error(), EIO);
}

}  // namespace
}  // namespace kvtier::testing
