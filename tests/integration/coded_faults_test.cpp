// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Coded records (Options::compression) under faults: an I/O error inside a coded record's bytes is
// a miss with nothing dropped (no evidence against the record); verify() reports its progress to
// the end and drops exactly the one damaged coded record among raw and coded ones. Over O_DIRECT
// and buffered reads, and with coded records decoded by the device (testing::DecodingDevice).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "compressible_kv.hpp"
#include "decoding_device.hpp"
#include "fault_engine.hpp"
#include "kvtier/kvtier.hpp"
#include "test_util.hpp"
#include "tp_reference.hpp"
#include "tp_restore.hpp"

namespace kvtier {
namespace {

using testing::StoredPayload;
using testing::TempDir;
using testing::TpModel;

/// A session saved coded at TP 1, one of its chunks random (kept raw among the coded ones).
struct Saved {
  TpModel m{.heads = 1, .layers = 2, .head_dim = 64, .chunk = 32, .max_tp = 1, .tokens = 320};
  std::vector<Token> tokens;
  std::vector<std::byte> whole;
};

/// The read path and whether coded records decode "on the device" (testing::DecodingDevice).
struct FaultCase {
  IoPath io;
  bool device_decodes;
};

class CodedFaults : public ::testing::TestWithParam<FaultCase> {
 protected:
  void SetUp() override {
    if (GetParam().device_decodes) decoding_.emplace();
  }
  std::optional<testing::DecodingDeviceScope> decoding_;

  Options options(const std::string& root, const Saved& s) const {
    Options o = testing::tp_free_options(root, s.m.rank(0, 1), s.m.max_tp, 1ull << 30);
    o.segment_bytes = 16 << 20;
    o.compression = Compression::kSplit16;
    o.io_path = GetParam().io;
    return o;
  }

  Saved save(const std::string& root, std::mt19937_64& rng, uint64_t random_chunk) const {
    Saved s;
    s.tokens.resize(s.m.tokens);
    for (auto& t : s.tokens) t = static_cast<Token>(rng() % 50000);
    s.whole = testing::bf16_kv(s.m, rng, {random_chunk});
    auto e = Engine::open(options(root, s));
    EXPECT_TRUE(e) << e.error().message();
    std::vector<std::byte> kv = s.whole;
    auto saved = (*e)->save(s.tokens, testing::host_kv(kv, s.m.tokens));
    EXPECT_TRUE(saved && saved->tokens_stored == s.m.tokens);
    return s;
  }
};

TEST_P(CodedFaults, AnIoErrorInsideACodedRecordIsAMissAndDropsNothing) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 10; ++trial) {
    TempDir dir;
    const Saved s = save(dir.str(), rng, 2);
    std::vector<StoredPayload> all = testing::stored_payloads(dir.path());
    ASSERT_EQ(all.size(), 10u);
    const StoredPayload& hit = all[rng() % all.size()];
    const uint64_t target = hit.offset + rng() % hit.bytes;
    std::atomic<int> once{0};
    testing::FaultScope scope([&](const IoRequest& r, uint64_t) {
      if (r.write || target < r.offset || target >= r.offset + r.length || once.exchange(1))
        return testing::Fault{};
      return testing::Fault{.inject = true, .result = -EIO};
    });
    auto e = Engine::open(options(dir.str(), s));
    ASSERT_TRUE(e) << e.error().message();
    auto [got, result] = testing::restore_rank(**e, s.m, s.tokens, 0, 1, rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", byte " << target);
    EXPECT_EQ(result.checksum_misses, 0u) << result.problem;
    EXPECT_LT(result.tokens_restored, s.m.tokens);
    const uint64_t row = s.m.rank(0, 1).row_bytes();
    for (uint64_t line = 0; line < 2ull * s.m.layers; ++line) {
      for (uint64_t t = 0; t < result.tokens_restored; ++t) {
        const uint64_t off = (line * s.m.tokens + t) * row;
        ASSERT_EQ(std::memcmp(got.data() + off, s.whole.data() + off, row), 0) << "token " << t;
      }
    }
    EXPECT_EQ(*(*e)->lookup(s.tokens), s.m.tokens) << "a record was dropped";
  }
}

TEST_P(CodedFaults, VerifyReportsItsProgressToTheEnd) {
  std::mt19937_64 rng(testing::test_seed());
  TempDir dir;
  const Saved s = save(dir.str(), rng, 3);
  auto e = Engine::open(options(dir.str(), s));
  ASSERT_TRUE(e) << e.error().message();
  uint64_t calls = 0, last_done = 0, last_total = 0;
  auto report = (*e)->verify([&](uint64_t done, uint64_t total) {
    ++calls;
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  });
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->records_checked, 10u);
  EXPECT_EQ(report->corrupt_records, 0u);
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(last_done, last_total);
}

TEST_P(CodedFaults, VerifyDropsExactlyTheDamagedCodedRecord) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 8; ++trial) {
    TempDir dir;
    const Saved s = save(dir.str(), rng, 3);
    std::vector<StoredPayload> coded;
    for (const StoredPayload& p : testing::stored_payloads(dir.path())) {
      if (p.coded) coded.push_back(p);
    }
    ASSERT_EQ(coded.size(), 9u);
    const StoredPayload& p = coded[rng() % coded.size()];
    // Early bytes are the codec's header and table, later ones its blocks.
    testing::damage(p, trial % 2 ? rng() % std::min<uint64_t>(p.bytes, 256) : rng() % p.bytes, rng);
    auto e = Engine::open(options(dir.str(), s));
    ASSERT_TRUE(e) << e.error().message();
    auto report = (*e)->verify();
    ASSERT_TRUE(report) << report.error().message();
    EXPECT_EQ(report->corrupt_records, 1u) << "trial " << trial;
    EXPECT_EQ(report->records_checked, 10u);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CodedFaults,
                         ::testing::Values(FaultCase{IoPath::kDirect, false},
                                           FaultCase{IoPath::kBuffered, false},
                                           FaultCase{IoPath::kDirect, true}),
                         [](const auto& info) {
                           return std::string(info.param.io == IoPath::kDirect ? "Direct"
                                                                               : "Buffered") +
                                  (info.param.device_decodes ? "DecodedOnTheDevice" : "");
                         });

}  // namespace
}  // namespace kvtier
