// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Options::read_only: a snapshot of the index read beside a writer, without the store's lock
// (kvtier ls and stat; tests/cli/cli_test.sh runs them beside a writer process).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "host_session_test.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

class StoreSnapshotTest : public testing::HostSessionTest {
 protected:
  Options options() const { return testing::small_options(dir_.str(), g_); }
  Options reader_options() const {
    Options o = options();
    o.read_only = true;
    o.capacity_bytes = 0;
    o.segment_bytes = 0;
    return o;
  }
};

// Sessions of random lengths (partial chunks included) saved by a writer that stays open; readers
// opened between saves see exactly what was acknowledged before them, byte for byte, and neither
// wait for the writer nor keep a second writer out once the first has closed.
TEST_F(StoreSnapshotTest, ReaderBesideAWriterSeesWhatWasAcknowledged) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::vector<Token>> saved;
  auto writer = Engine::open(options());
  ASSERT_OK(writer);
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 3; ++i) {
      saved.push_back(synthetic::tokens(rng(), 1 + rng() % 3000));
      ASSERT_OK(save(**writer, saved.back()));
    }
    auto reader = Engine::open(reader_options());
    ASSERT_OK(reader);
    EXPECT_EQ((*reader)->stats().records, (*writer)->stats().records);
    for (const auto& s : saved) EXPECT_EQ(restored(**reader, s), s.size());
    auto refused = save(**reader, synthetic::tokens(rng(), 100));
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code(), ErrorCode::kPermission) << refused.error().to_string();
  }
  auto reader = Engine::open(reader_options());
  ASSERT_OK(reader);
  writer->reset();
  auto second = Engine::open(options());
  ASSERT_OK(second) << "a read-only open kept a writer out";
  ASSERT_OK(save(**second, synthetic::tokens(rng(), 500)));
  for (const auto& s : saved) EXPECT_EQ(restored(**reader, s), s.size());
}

TEST_F(StoreSnapshotTest, ReadOnlyOpenOfNoStoreCreatesNothing) {
  auto reader = Engine::open(reader_options());
  ASSERT_FALSE(reader.has_value());
  EXPECT_EQ(reader.error().code(), ErrorCode::kNotFound) << reader.error().to_string();
  EXPECT_FALSE(fs::exists(dir_.path() / "rank0of1"));
}

}  // namespace
}  // namespace kvtier
