// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "codec/split16.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/checksum.hpp"
#include "split16_kernel_emulation.hpp"
#include "test_util.hpp"

namespace kvtier::codec {
namespace {

using Bytes = std::vector<std::byte>;

uint16_t bf16_of(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }

Bytes gaussian_bf16(size_t words, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, sigma);
  Bytes out(words * 2);
  for (size_t i = 0; i < words; ++i) {
    const uint16_t w = bf16_of(d(rng));
    std::memcpy(out.data() + 2 * i, &w, 2);
  }
  return out;
}

Bytes random_bytes(size_t n, std::mt19937_64& rng) {
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

Bytes encode(const Bytes& raw) {
  Bytes out(split16_bound(raw.size()));
  auto n = split16_encode(raw, out);
  EXPECT_TRUE(n.has_value()) << n.error().to_string();
  out.resize(n.value_or(0));
  return out;
}

void expect_round_trip(const Bytes& raw) {
  const Bytes stored = encode(raw);
  EXPECT_LE(stored.size(), split16_bound(raw.size()));
  auto size = split16_decoded_bytes(stored);
  ASSERT_TRUE(size.has_value()) << size.error().to_string();
  ASSERT_EQ(*size, raw.size());
  Bytes back(raw.size(), std::byte{0x5a});
  ASSERT_TRUE(split16_decode(stored, back).ok());
  ASSERT_EQ(back, raw);
}

TEST(Split16, RoundTripsSeededKvLikeAndRandomDataOfEveryLength) {
  const uint64_t seed = 20261204;
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::vector<size_t> sizes = {0, 1, 2, 3, 8, 8190, 8191, 8192, 8193, 8194, 16384, 3 * 8192 + 6};
  for (int i = 0; i < 40; ++i) sizes.push_back(rng() % (5 * 8192));
  for (size_t bytes : sizes) {
    for (float sigma : {1e-4f, 0.02f, 1.0f, 300.0f}) {
      Bytes raw = gaussian_bf16(bytes / 2, sigma, rng);
      if (bytes % 2) raw.push_back(static_cast<std::byte>(rng()));
      expect_round_trip(raw);
    }
    expect_round_trip(random_bytes(bytes, rng));
  }
}

TEST(Split16, RoundTripsEveryExponentSignNanInfinityAndZero) {
  Bytes raw;
  for (uint32_t w = 0; w < 65536; ++w) {
    raw.push_back(static_cast<std::byte>(w & 0xff));
    raw.push_back(static_cast<std::byte>(w >> 8));
  }
  expect_round_trip(raw);
  expect_round_trip(Bytes(4 * 8192, std::byte{0}));
  Bytes inf_nan;
  for (uint16_t w : {0x7f80, 0xff80, 0x7fc0, 0xffff, 0x0001, 0x8000}) {
    for (int i = 0; i < 3000; ++i) {
      inf_nan.push_back(static_cast<std::byte>(w & 0xff));
      inf_nan.push_back(static_cast<std::byte>(w >> 8));
    }
  }
  expect_round_trip(inf_nan);
}

TEST(Split16, ShrinksGaussianBf16AndNeverGrowsPastTheBound) {
  std::mt19937_64 rng(7);
  const Bytes kv = gaussian_bf16(1 << 20, 0.5f, rng);
  const double ratio = static_cast<double>(kv.size()) / encode(kv).size();
  RecordProperty("gaussian_ratio", std::to_string(ratio));
  // A Gaussian's exponent carries ~3 bits: 16 bits become about 8 + 3-4.
  EXPECT_GT(ratio, 1.3) << ratio;
  const Bytes noise = random_bytes(1 << 20, rng);
  const Bytes stored = encode(noise);
  EXPECT_LE(stored.size(), split16_bound(noise.size()));
  EXPECT_LT(stored.size(), noise.size() + noise.size() / 200);
}

// Any damage: refused, or decoded to the original, or to bytes whose record checksum differs (the
// restore then drops the record). Never a crash or an out-of-bounds access (run under ASan).
void expect_damage_caught(const Bytes& raw, const Bytes& damaged) {
  auto size = split16_decoded_bytes(damaged);
  if (!size) return;
  if (*size > (64u << 20)) return;  // a damaged size the caller would refuse to allocate
  Bytes back(*size);
  Status s = split16_decode(damaged, back);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), ErrorCode::kCorrupt) << s.to_string();
    return;
  }
  if (back == raw) return;
  EXPECT_NE(kvsum::of(back.data(), back.size()), kvsum::of(raw.data(), raw.size()));
}

TEST(Split16, DamagedStreamsAreRefusedOrCaughtByTheRecordChecksum) {
  std::mt19937_64 rng(11);
  Bytes raw = gaussian_bf16(3 * 4096 + 100, 0.1f, rng);
  raw.push_back(std::byte{7});
  const Bytes stored = encode(raw);
  size_t refused = 0;
  for (size_t at = 0; at < stored.size(); at += (at < 4096 ? 1 : 37)) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      Bytes damaged = stored;
      damaged[at] ^= std::byte{flip};
      expect_damage_caught(raw, damaged);
      refused += split16_decoded_bytes(damaged).has_value() ? 0 : 1;
    }
  }
  for (size_t cut = 0; cut < stored.size(); cut += 1 + cut / 8) {
    Bytes truncated(stored.begin(), stored.begin() + static_cast<long>(cut));
    EXPECT_FALSE(split16_decoded_bytes(truncated).has_value()) << cut;
  }
  EXPECT_GT(refused, 0u);
}

TEST(Split16, AHeaderOnlyTableSaysHowManyBytesTheBlocksNeed) {
  std::mt19937_64 rng(19);
  const Bytes stored = encode(gaussian_bf16(2 * 4096 + 9, 0.3f, rng));
  auto whole = split16_table(stored);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->stored_bytes, stored.size());
  const Bytes head(stored.begin(), stored.begin() + static_cast<long>(whole->data_offset));
  EXPECT_FALSE(split16_table(head).has_value());
  auto planned = split16_table(head, /*header_only=*/true);
  ASSERT_TRUE(planned.has_value()) << planned.error().to_string();
  EXPECT_EQ(planned->stored_bytes, stored.size());
  EXPECT_EQ(planned->blocks.size(), 3u);
}

TEST(Split16, RefusesAnOutputOfTheWrongSize) {
  std::mt19937_64 rng(3);
  const Bytes raw = gaussian_bf16(1000, 1.0f, rng);
  const Bytes stored = encode(raw);
  Bytes small(raw.size() - 2);
  EXPECT_EQ(split16_decode(stored, small).code(), ErrorCode::kInvalidArgument);
  Bytes tiny_out(10);
  EXPECT_FALSE(split16_encode(raw, tiny_out).has_value());
}

// Seals an edited header and table again (the layout of split16_format.hpp), so the edit reaches
// the checks past the table checksum.
void seal(Bytes& s) {
  uint32_t blocks;
  std::memcpy(&blocks, s.data() + 20, 4);
  const uint64_t sum =
      XXH3_64bits_withSeed(s.data() + 40, size_t{blocks} * 16, XXH3_64bits(s.data(), 32));
  std::memcpy(s.data() + 32, &sum, 8);
}

TEST(Split16, RefusesNonZeroZeroFieldsEvenWithTheTableSealed) {
  std::mt19937_64 rng(13);
  for (size_t bytes : {size_t{3 * 8192 + 10}, size_t{3 * 8192 + 11}}) {
    SCOPED_TRACE(::testing::Message() << bytes << " bytes");
    Bytes raw = gaussian_bf16(bytes / 2, 0.1f, rng);
    if (bytes % 2) raw.push_back(std::byte{0x42});
    const Bytes stored = encode(raw);
    ASSERT_EQ(split16_decoded_bytes(stored).value_or(0), bytes);
    std::vector<size_t> zero_at = {25, 26, 27, 28, 29, 30, 31};
    if (bytes % 2 == 0) zero_at.push_back(24);  // an even payload has no tail byte
    for (size_t entry = 0; entry < 4; ++entry) zero_at.push_back(40 + 16 * entry + 15);
    for (size_t at : zero_at) {
      Bytes damaged = stored;
      damaged[at] = std::byte{0x10};
      seal(damaged);
      auto got = split16_decoded_bytes(damaged);
      ASSERT_FALSE(got.has_value()) << "byte " << at;
      EXPECT_EQ(got.error().code(), ErrorCode::kCorrupt);
    }
  }
}

TEST(Split16, RefusesPayloadsPastTheFormatsSizeWithoutTouchingThem) {
  EXPECT_EQ(split16_bound(SIZE_MAX), SIZE_MAX);
  EXPECT_EQ(split16_bound(kSplit16MaxBytes + 1), SIZE_MAX);
  EXPECT_GT(split16_bound(kSplit16MaxBytes), kSplit16MaxBytes);
  EXPECT_LT(split16_bound(kSplit16MaxBytes), SIZE_MAX);
  // A 32 TiB input and output: address space only (PROT_NONE), so any touch would crash.
  const size_t in_bytes = kSplit16MaxBytes + 1, out_bytes = in_bytes + (size_t{1} << 40);
  void* in =
      ::mmap(nullptr, in_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (in == MAP_FAILED) GTEST_SKIP() << "no 32 TiB of address space";
  void* out =
      ::mmap(nullptr, out_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (out == MAP_FAILED) {
    ::munmap(in, in_bytes);
    GTEST_SKIP() << "no 64 TiB of address space";
  }
  auto n = split16_encode(std::span(static_cast<const std::byte*>(in), in_bytes),
                          std::span(static_cast<std::byte*>(out), out_bytes));
  ::munmap(in, in_bytes);
  ::munmap(out, out_bytes);
  ASSERT_FALSE(n.has_value());
  EXPECT_EQ(n.error().code(), ErrorCode::kInvalidArgument);
}

TEST(Split16, TheCudaDecodersStepsRunSeriallyDecodeWhatTheHostDecodes) {
  const uint64_t seed = 20261205;
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::vector<size_t> sizes = {2, 3, 30, 8190, 8192, 8194, 3 * 8192 + 7, 1 << 20};
  for (int i = 0; i < 20; ++i) sizes.push_back(2 + rng() % (6 * 8192));
  for (size_t bytes : sizes) {
    std::vector<Bytes> raws;
    for (float sigma : {1e-3f, 0.5f, 100.0f}) {
      raws.push_back(gaussian_bf16(bytes / 2, sigma, rng));
      if (bytes % 2) raws.back().push_back(static_cast<std::byte>(rng()));
    }
    raws.push_back(random_bytes(bytes, rng));
    for (const Bytes& raw : raws) {
      auto [back, flagged] = emulate_kernel(encode(raw));
      EXPECT_EQ(std::count(flagged.begin(), flagged.end(), true), 0);
      ASSERT_EQ(back, raw) << bytes << " bytes";
    }
  }
}

// Blocks of every code width (1..7 bits: 1 to 127 symbols in the codebook, some escaped), of
// lengths no multiple of the host decoder's eight codes at a time, escapes falling anywhere:
// decoded exactly, as the CUDA decoder's steps decode them; with their codes, escapes or rests
// damaged, refused exactly where those steps flag them, and decoded alike where not.
TEST(Split16, EveryCodeWidthDecodesAsTheCudaDecodersStepsDoWholeOrDamaged) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::set<uint32_t> widths;
  uint64_t damaged_refused = 0, damaged_decoded = 0;
  for (int round = 0; round < 300; ++round) {
    // Symbols for each code width in turn (2^(w-1) to 2^w - 1 of them take w bits), and past 127.
    const uint32_t width = 1 + round % 8;
    const uint32_t symbols =
        width == 8 ? 128 + static_cast<uint32_t>(rng() % 100)
                   : (1u << (width - 1)) + static_cast<uint32_t>(rng() % (1u << (width - 1)));
    const size_t words = 1 + rng() % (3 * kSplit16BlockWords);
    const double escaped = rng() % 3 == 0 ? 0.0 : 0.002 * static_cast<double>(rng() % 50);
    std::vector<uint8_t> alphabet(256);
    std::iota(alphabet.begin(), alphabet.end(), 0);
    std::shuffle(alphabet.begin(), alphabet.end(), rng);
    Bytes raw(words * 2 + rng() % 2);
    std::uniform_real_distribution<double> u(0, 1);
    for (size_t i = 0; i < words; ++i) {
      const uint8_t s = u(rng) < escaped ? alphabet[symbols + rng() % (256 - symbols)]
                                         : alphabet[rng() % symbols];
      const uint16_t w = split16_word(s, static_cast<uint32_t>(rng()));
      std::memcpy(raw.data() + 2 * i, &w, 2);
    }
    if (raw.size() % 2) raw.back() = static_cast<std::byte>(rng());
    const Bytes stored = encode(raw);
    auto t = split16_table(stored);
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    for (const Split16Block& b : t->blocks) {
      if (b.mode == kSplit16Coded) widths.insert(b.bits);
    }
    Bytes back(raw.size());
    ASSERT_TRUE(split16_decode(stored, back).ok()) << "round " << round;
    ASSERT_EQ(back, raw) << "round " << round;
    ASSERT_EQ(emulate_kernel(stored).first, raw) << "round " << round;
    // Damage a coded block's data past its escape count (codes, escaped symbols, rests).
    for (int trial = 0; trial < 4; ++trial) {
      const Split16Block& b = t->blocks[rng() % t->blocks.size()];
      if (b.mode != kSplit16Coded) continue;
      Bytes damaged = stored;
      damaged[t->data_offset + b.offset + 4 + rng() % (b.bytes - 4)] ^=
          static_cast<std::byte>(1 + rng() % 255);
      Bytes host(raw.size());
      const bool host_ok = split16_decode(damaged, host).ok();
      auto [emulated, flagged] = emulate_kernel(damaged);
      const bool refused = std::find(flagged.begin(), flagged.end(), true) != flagged.end();
      ASSERT_EQ(refused, !host_ok) << "round " << round << " trial " << trial;
      if (host_ok) {
        ASSERT_EQ(emulated, host) << "round " << round << " trial " << trial;
      }
      (host_ok ? damaged_decoded : damaged_refused) += 1;
    }
  }
  EXPECT_EQ(widths, (std::set<uint32_t>{1, 2, 3, 4, 5, 6, 7})) << "code widths not all drawn";
  EXPECT_GT(damaged_refused, 0u);
  EXPECT_GT(damaged_decoded, 0u);
}

// Damage inside one coded block's data (the table stays true): the emulated kernel flags exactly
// when the host decoder refuses, leaves that block's words unwritten, and decodes the rest.
TEST(Split16, TheCudaDecodersStepsFlagWhatTheHostRefusesAndWriteNothingOfIt) {
  std::mt19937_64 rng(17);
  Bytes raw = gaussian_bf16(3 * 4096, 0.05f, rng);
  // A last block of two exponents: coded 2 bits wide with a codebook of 2, so code 2 is in no
  // codebook and not the escape.
  for (int i = 0; i < 4096 - 5; ++i) {
    const uint16_t w = static_cast<uint16_t>((rng() % 2 ? 0x3f00 : 0x3f80) | (rng() & 0x807f));
    raw.push_back(static_cast<std::byte>(w & 0xff));
    raw.push_back(static_cast<std::byte>(w >> 8));
  }
  const Bytes stored = encode(raw);
  auto t = split16_table(stored);
  ASSERT_TRUE(t.has_value());
  size_t flagged_blocks = 0, wrong_code_blocks = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t bi = rng() % t->blocks.size();
    const Split16Block& b = t->blocks[bi];
    ASSERT_EQ(b.mode, kSplit16Coded);
    Bytes damaged = stored;
    const size_t within = trial % 3 == 0 ? rng() % 4 : 4 + rng() % (b.bytes - 4);
    damaged[t->data_offset + b.offset + within] ^= static_cast<std::byte>(1 + rng() % 255);
    Bytes host(raw.size());
    const Status host_status = split16_decode(damaged, host);
    const bool host_ok = host_status.ok();
    auto [back, flagged] = emulate_kernel(damaged);
    ASSERT_EQ(flagged.size(), t->blocks.size());
    for (size_t k = 0; k < flagged.size(); ++k) {
      EXPECT_TRUE(k == bi || !flagged[k]) << "block " << k;
    }
    ASSERT_EQ(flagged[bi], !host_ok) << "trial " << trial;
    if (host_ok) {
      EXPECT_EQ(back, host);
      continue;
    }
    ++flagged_blocks;
    wrong_code_blocks += host_status.message().find("codebook") != std::string::npos ? 1 : 0;
    for (size_t i = 0; i < back.size(); ++i) {
      const bool in_block = i >= b.out_offset && i < b.out_offset + size_t{b.words} * 2;
      if (in_block) {
        ASSERT_EQ(back[i], std::byte{0xEE}) << "trial " << trial << " byte " << i;
      } else {
        ASSERT_EQ(back[i], raw[i]) << "trial " << trial << " byte " << i;
      }
    }
  }
  EXPECT_GT(flagged_blocks, 100u);
  EXPECT_GT(wrong_code_blocks, 0u);
}

}  // namespace
}  // namespace kvtier::codec
