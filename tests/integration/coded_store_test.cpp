// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Coded records (Options::compression): a TP-free store keeps 16-bit KV coded by split16 where that
// saves bytes and raw where it does not, and every restore, at every TP size, from the drives and
// from the DRAM tier, into contiguous or paged memory, delivers the KV byte for byte; a damaged
// coded record is a miss, never wrong KV. KV is drawn like a model's bf16 activations (normally
// distributed values, whose exponents cluster), with chunks of random bytes among them.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <vector>

#include <xxhash.h>
#include "compressible_kv.hpp"
#include "decoding_device.hpp"

#include "kvtier/kvtier.hpp"
#include "store/record_v2.hpp"
#include "test_util.hpp"
#include "tp_reference.hpp"
#include "tp_restore.hpp"

namespace kvtier {
namespace {

using testing::bf16_kv;
using testing::stored_payloads;
using testing::StoredPayload;
using testing::TempDir;
using testing::TpModel;

Options coded_options(const std::string& root, const KvGeometry& g, uint32_t max_tp,
                      uint64_t dram = 0) {
  Options o = testing::tp_free_options(root, g, max_tp, 1ull << 30);
  o.segment_bytes = 16 << 20;
  o.compression = Compression::kSplit16;
  o.dram_bytes = dram;
  return o;
}

std::vector<Token> drawn_tokens(uint64_t n, std::mt19937_64& rng) {
  std::vector<Token> tokens(n);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 50000);
  return tokens;
}

/// Saves the session at TP `tp`; returns the payload bytes the ranks wrote.
uint64_t save_at(const std::string& root, const TpModel& m, const std::vector<std::byte>& whole,
                 const std::vector<Token>& tokens, uint32_t tp) {
  uint64_t written = 0;
  for (uint32_t r = 0; r < tp; ++r) {
    auto engine = Engine::open(coded_options(root, m.rank(r, tp), m.max_tp));
    EXPECT_TRUE(engine) << engine.error().message();
    if (!engine) return 0;
    std::vector<std::byte> slice = testing::rank_slice(m, whole, r, tp);
    auto saved = (*engine)->save(tokens, testing::host_kv(slice, m.tokens));
    EXPECT_TRUE(saved && saved->tokens_stored == m.tokens)
        << (saved ? "" : saved.error().message());
    if (saved) written += saved->bytes_written;
  }
  return written;
}

/// Where coded records decode on a restore: on the host (the consumer threads), or "on the
/// device" (testing::DecodingDevice, which takes the stored bytes and decodes them itself as the
/// CUDA device does).
enum class Decoder { kHost, kDevice };

class CodedDecoding : public ::testing::TestWithParam<Decoder> {
 protected:
  void SetUp() override {
    if (GetParam() == Decoder::kDevice) decoding_.emplace();
  }
  std::optional<testing::DecodingDeviceScope> decoding_;
};

TEST_P(CodedDecoding, EveryDrawnGeometryRoundTripsByteExactAtEveryTpSizeAndStoresFewerBytes) {
  std::mt19937_64 rng(testing::test_seed());
  const uint32_t kHeads[] = {1, 2, 3, 4, 8, 16};
  for (int round = 0; round < 6; ++round) {
    TpModel m;
    m.heads = kHeads[rng() % std::size(kHeads)];
    m.layers = 1 + static_cast<uint32_t>(rng() % 3);
    m.head_dim = 4 * (1 + static_cast<uint32_t>(rng() % 40));  // rows are whole 8-byte words
    m.chunk = 1 + static_cast<uint32_t>(rng() % 96);
    m.max_tp = rng() % 2 == 0 ? 4 : 8;
    m.tokens = 1 + rng() % (6 * m.chunk);
    if (round == 5) {  // an MLA latent: one head every rank holds
      m.heads = 1;
      m.kv_tensors = 1;
      m.head_dim = 576;
    }
    // Some chunks random: kept raw beside the coded ones.
    std::vector<uint64_t> random_chunks;
    for (uint64_t c = 0; c * m.chunk < m.tokens; ++c) {
      if (rng() % 3 == 0) random_chunks.push_back(c);
    }
    const std::vector<std::byte> whole = bf16_kv(m, rng, random_chunks);
    const std::vector<Token> tokens = drawn_tokens(m.tokens, rng);
    const std::vector<uint32_t> sizes = m.tp_sizes();
    const uint32_t saver = sizes[rng() % sizes.size()];
    SCOPED_TRACE(::testing::Message()
                 << "heads " << m.heads << " layers " << m.layers << " head_dim " << m.head_dim
                 << " chunk " << m.chunk << " tokens " << m.tokens << " kv_tensors " << m.kv_tensors
                 << " saved at TP " << saver);
    TempDir dir;
    const uint64_t written = save_at(dir.str(), m, whole, tokens, saver);
    // A TP-free store holds each head once (a latent once): its raw bytes are the model's.
    const uint64_t raw = whole.size();
    EXPECT_LE(written, raw);
    // Records of bf16 words shrink: at least 1/20 over the coded chunks when they are large
    // enough to carry a block table (an MLA latent's record is, a tiny geometry's may not be).
    if (random_chunks.empty() && m.kv_tensors * m.layers * m.chunk * m.head_bytes() >= 64 << 10) {
      EXPECT_LT(written, raw - raw / 20) << written << " of " << raw;
    }
    for (uint32_t tp : sizes) {
      for (uint32_t r = 0; r < tp; ++r) {
        auto engine = Engine::open(coded_options(dir.str(), m.rank(r, tp), m.max_tp));
        ASSERT_TRUE(engine) << engine.error().message();
        auto [got, result] = testing::restore_rank(**engine, m, tokens, r, tp, rng);
        EXPECT_EQ(result.tokens_restored, m.tokens) << result.problem;
        EXPECT_EQ(result.checksum_misses, 0u);
        EXPECT_TRUE(got == testing::rank_slice(m, whole, r, tp))
            << "rank " << r << " of TP " << tp << " restored other bytes";
      }
    }
  }
}

TEST_P(CodedDecoding, RandomKvIsKeptRawAndCodedRecordsServeFromTheDramTier) {
  std::mt19937_64 rng(testing::test_seed());
  TpModel m{.heads = 4, .layers = 2, .head_dim = 128, .chunk = 64, .max_tp = 4, .tokens = 300};
  const std::vector<Token> tokens = drawn_tokens(m.tokens, rng);
  std::vector<uint64_t> all;
  for (uint64_t c = 0; c * m.chunk < m.tokens; ++c) all.push_back(c);
  {
    TempDir dir;
    const std::vector<std::byte> random = bf16_kv(m, rng, all);
    EXPECT_EQ(save_at(dir.str(), m, random, tokens, 1), random.size()) << "random KV kept raw";
  }
  // Chunks 1 and 3 random: the tier holds raw images beside coded ones, and a restore decodes a
  // record at a time (records of 256 KiB against the test's 256 KiB staging).
  TempDir dir;
  const std::vector<std::byte> whole = bf16_kv(m, rng, {1, 3});
  auto engine = Engine::open(coded_options(dir.str(), m.rank(0, 1), m.max_tp, 64 << 20));
  ASSERT_TRUE(engine) << engine.error().message();
  std::vector<std::byte> slice = whole;
  auto saved = (*engine)->save(tokens, testing::host_kv(slice, m.tokens));
  ASSERT_TRUE(saved) << saved.error().message();
  EXPECT_LT(saved->bytes_written, whole.size() - whole.size() / 20);
  // Stats say what coding did: the KV's bytes, what was written, how many records were coded (the
  // three chunks of bf16 words in each of the four heads' groups; the two random ones are raw).
  const Stats written = (*engine)->stats();
  EXPECT_EQ(written.kv_bytes_written, whole.size());
  EXPECT_EQ(written.bytes_written, saved->bytes_written);
  EXPECT_EQ(written.coded_records_written, 3u * 4);
  // The tier holds the coded images; a hit decodes them like a drive's records.
  const uint64_t hits = (*engine)->stats().dram_hits;
  auto [got, result] = testing::restore_rank(**engine, m, tokens, 0, 1, rng);
  EXPECT_EQ(result.tokens_restored, m.tokens) << result.problem;
  EXPECT_GT((*engine)->stats().dram_hits, hits);
  EXPECT_TRUE(got == whole);
  // The same KV saved again is present, not written twice.
  auto again = (*engine)->save(tokens, testing::host_kv(slice, m.tokens));
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(again->chunks_written, 0u);
}

/// Where each format-2 record's stored payload lies in a segment file: (payload offset, stored
/// bytes, coded), found by the header magic at each 4 KiB block.
TEST_P(CodedDecoding, ADamagedCodedRecordIsAMissNeverWrongKv) {
  std::mt19937_64 rng(testing::test_seed());
  TpModel m{.heads = 2, .layers = 2, .head_dim = 64, .chunk = 32, .max_tp = 2, .tokens = 160};
  const std::vector<Token> tokens = drawn_tokens(m.tokens, rng);
  const std::vector<std::byte> whole = bf16_kv(m, rng);
  for (int trial = 0; trial < 24; ++trial) {
    TempDir dir;
    save_at(dir.str(), m, whole, tokens, 1);
    // Two head groups, a store each: 5 records in each one's segment file, in token order.
    std::vector<StoredPayload> all = stored_payloads(dir.path());
    ASSERT_EQ(all.size(), 10u);
    for (const StoredPayload& p : all) ASSERT_TRUE(p.coded);
    const std::vector<StoredPayload> payloads = testing::payloads_of_a_file(all, rng);
    ASSERT_EQ(payloads.size(), 5u);
    const size_t chunk = rng() % payloads.size();
    const StoredPayload& p = payloads[chunk];
    // Early bytes are the codec's header and table, later ones its blocks: both are tried.
    const uint64_t at = trial % 2 == 0 ? rng() % std::min<uint64_t>(p.bytes, 256) : rng() % p.bytes;
    testing::damage(p, at, rng);
    auto engine = Engine::open(coded_options(dir.str(), m.rank(0, 1), m.max_tp));
    ASSERT_TRUE(engine) << engine.error().message();
    auto [got, result] = testing::restore_rank(**engine, m, tokens, 0, 1, rng);
    SCOPED_TRACE(::testing::Message() << "byte " << at << " of chunk " << chunk);
    EXPECT_EQ(result.tokens_restored, chunk * m.chunk);
    EXPECT_EQ(result.checksum_misses, 1u);
    // What was restored is the KV (rows past it are unspecified, as for any miss).
    const KvGeometry g = m.rank(0, 1);
    const uint64_t row = g.row_bytes();
    for (uint64_t line = 0; line < 2ull * m.layers; ++line) {
      for (uint64_t t = 0; t < result.tokens_restored; ++t) {
        const uint64_t off = (line * m.tokens + t) * row;
        ASSERT_EQ(std::memcmp(got.data() + off, whole.data() + off, row), 0) << "token " << t;
      }
    }
    // The damaged record is dropped: the next lookup ends before it.
    EXPECT_EQ(*(*engine)->lookup(tokens), chunk * m.chunk);
  }
}

/// Sets the codec field of the format-2 header at `header` in `file` (the header's checksum made
/// again, so the header stays well formed).
void set_codec(const std::filesystem::path& file, uint64_t header, uint32_t codec) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  RecordHeader2 h;
  f.seekg(static_cast<std::streamoff>(header));
  f.read(reinterpret_cast<char*>(&h), sizeof(h));
  h.codec = codec;
  h.header_checksum = XXH3_64bits(&h, offsetof(RecordHeader2, header_checksum));
  f.seekp(static_cast<std::streamoff>(header));
  f.write(reinterpret_cast<const char*>(&h), sizeof(h));
}

TEST_P(CodedDecoding, ARecordOfACodecThisBuildDoesNotDecodeIsAMissAndIsKept) {
  std::mt19937_64 rng(testing::test_seed());
  TpModel m{.heads = 1, .layers = 2, .head_dim = 64, .chunk = 32, .max_tp = 1, .tokens = 160};
  const std::vector<Token> tokens = drawn_tokens(m.tokens, rng);
  const std::vector<std::byte> whole = bf16_kv(m, rng);
  TempDir dir;
  save_at(dir.str(), m, whole, tokens, 1);
  std::vector<StoredPayload> payloads = stored_payloads(dir.path());
  ASSERT_EQ(payloads.size(), 5u);
  std::sort(payloads.begin(), payloads.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  const StoredPayload& third = payloads[2];
  // Written by a later build with a codec this one lacks (nvCOMP's ANS, codec 2).
  set_codec(third.file, third.offset - 4096, static_cast<uint32_t>(Codec::kNvcompAns));
  {
    auto engine = Engine::open(coded_options(dir.str(), m.rank(0, 1), m.max_tp));
    ASSERT_TRUE(engine) << engine.error().message();
    auto [got, result] = testing::restore_rank(**engine, m, tokens, 0, 1, rng);
    EXPECT_EQ(result.tokens_restored, 2u * m.chunk) << result.problem;
    EXPECT_EQ(result.checksum_misses, 0u) << "a record this build cannot read is not damaged";
    EXPECT_EQ(*(*engine)->lookup(tokens), m.tokens) << "and it is kept";
  }
  // Read again by a build that decodes it (here: its codec put back), it serves the session.
  set_codec(third.file, third.offset - 4096, static_cast<uint32_t>(Codec::kSplit16));
  auto engine = Engine::open(coded_options(dir.str(), m.rank(0, 1), m.max_tp));
  ASSERT_TRUE(engine) << engine.error().message();
  auto [got, result] = testing::restore_rank(**engine, m, tokens, 0, 1, rng);
  EXPECT_EQ(result.tokens_restored, m.tokens) << result.problem;
  EXPECT_TRUE(got == whole);
}

// A save larger than the store: refused before anything is evicted, coded as raw (a coded save
// writes its records a staging's worth at a time, each part reserved on its own).
TEST(CodedStore, ASaveTheStoreCannotHoldCostsNoStoredSession) {
  std::mt19937_64 rng(testing::test_seed());
  for (Compression c : {Compression::kOff, Compression::kSplit16}) {
    SCOPED_TRACE(compression_name(c));
    TempDir dir;
    TpModel m{.heads = 2, .layers = 1, .head_dim = 64, .chunk = 64, .max_tp = 1, .tokens = 200};
    Options o = coded_options(dir.str(), m.rank(0, 1), m.max_tp);
    o.capacity_bytes = 1 << 20;
    o.segment_bytes = 256 << 10;
    o.compression = c;
    auto engine = Engine::open(o);
    ASSERT_TRUE(engine) << engine.error().message();
    const std::vector<Token> first = drawn_tokens(m.tokens, rng);
    std::vector<std::byte> kv = bf16_kv(m, rng);
    ASSERT_TRUE((*engine)->save(first, testing::host_kv(kv, m.tokens)));
    // 2.6 MB of KV (1.7 MB coded) into a 1 MiB store.
    TpModel big = m;
    big.tokens = 64 * 80;
    std::vector<std::byte> big_kv = bf16_kv(big, rng);
    const std::vector<Token> second = drawn_tokens(big.tokens, rng);
    auto saved = (*engine)->save(second, testing::host_kv(big_kv, big.tokens));
    ASSERT_FALSE(saved) << "acknowledged " << saved->tokens_stored << " tokens, "
                        << *(*engine)->lookup(second) << " held";
    EXPECT_EQ(saved.error().code(), ErrorCode::kCapacity) << saved.error().message();
    EXPECT_EQ(*(*engine)->lookup(first), m.tokens) << "a refused save cost a stored session";
    EXPECT_EQ((*engine)->stats().evicted_records, 0u);
  }
}

TEST(CodedStore, ARawStoreTakesCodedRecordsLaterAndServesBoth) {
  std::mt19937_64 rng(testing::test_seed());
  TpModel m{.heads = 8, .layers = 1, .head_dim = 96, .chunk = 16, .max_tp = 8, .tokens = 100};
  const std::vector<std::byte> whole = bf16_kv(m, rng);
  const std::vector<Token> tokens = drawn_tokens(m.tokens, rng);
  TempDir dir;
  {
    Options o = coded_options(dir.str(), m.rank(0, 2), m.max_tp);
    o.compression = Compression::kOff;
    auto engine = Engine::open(o);
    ASSERT_TRUE(engine) << engine.error().message();
    std::vector<std::byte> slice = testing::rank_slice(m, whole, 0, 2);
    const std::span<const Token> half(tokens.data(), 48);
    auto saved = (*engine)->save(half, testing::host_kv(slice, m.tokens));
    ASSERT_TRUE(saved) << saved.error().message();
    EXPECT_EQ(saved->bytes_written, m.rank(0, 2).bytes_for_tokens(48));
  }
  save_at(dir.str(), m, whole, tokens, 2);  // rank 0's first 48 tokens are present, raw
  for (uint32_t tp : {1u, 4u}) {
    for (uint32_t r = 0; r < tp; ++r) {
      auto engine = Engine::open(coded_options(dir.str(), m.rank(r, tp), m.max_tp));
      ASSERT_TRUE(engine) << engine.error().message();
      auto [got, result] = testing::restore_rank(**engine, m, tokens, r, tp, rng);
      EXPECT_EQ(result.tokens_restored, m.tokens) << result.problem;
      EXPECT_TRUE(got == testing::rank_slice(m, whole, r, tp)) << "rank " << r << " of TP " << tp;
    }
  }
}

TEST(CodedStore, CompressionIsRefusedWhereRecordsCannotSayItOrHoldNo16BitWords) {
  TempDir dir;
  TpModel m{.heads = 2, .layers = 1, .head_dim = 64, .chunk = 16, .max_tp = 2, .tokens = 16};
  Options format1 = coded_options(dir.str(), m.rank(0, 1), m.max_tp);
  format1.store_format = 1;
  auto refused = Engine::open(format1);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("store_format 2"), std::string::npos)
      << refused.error().message();
  m.element_bytes = 1;
  auto fp8 = Engine::open(coded_options(dir.str(), m.rank(0, 1), m.max_tp));
  ASSERT_FALSE(fp8);
  EXPECT_EQ(fp8.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(fp8.error().message().find("16-bit"), std::string::npos) << fp8.error().message();
  EXPECT_EQ(*parse_compression("split16"), Compression::kSplit16);
  EXPECT_FALSE(parse_compression("zstd"));
}

INSTANTIATE_TEST_SUITE_P(Decoders, CodedDecoding,
                         ::testing::Values(Decoder::kHost, Decoder::kDevice), [](const auto& info) {
                           return info.param == Decoder::kHost ? "OnTheHost" : "OnTheDevice";
                         });

}  // namespace
}  // namespace kvtier
