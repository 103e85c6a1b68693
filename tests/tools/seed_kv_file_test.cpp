// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's KV from a file (`--kv file:PATH`): the tiling map, the file's checks
// against its sidecar and the model, and the host cache's fill and check of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "bench_kv.hpp"
#include "kv_file_rows.hpp"
#include "kv_source.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier::seed {
namespace {

// A KV file of `dims` with pseudo-random bytes and its sidecar, as forward_kv.py writes them.
std::string write_kv_file(const std::filesystem::path& dir, const KvFileDims& d,
                          const std::string& dtype = "bfloat16") {
  const std::string path = (dir / "kv.bin").string();
  const uint64_t words = uint64_t{2} * d.layers * d.tokens * d.heads * d.head_dim * 2 / 8;
  std::vector<uint64_t> data(words);
  for (uint64_t i = 0; i < words; ++i) data[i] = synthetic::mix64(i + 1);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(words * 8));
  const nlohmann::json meta = {{"file", path},
                               {"shape", {2, d.layers, d.tokens, d.heads, d.head_dim}},
                               {"dtype", dtype},
                               {"model", "test bytes, no model"},
                               {"tokens", d.tokens}};
  std::ofstream(path + ".json") << meta.dump();
  return path;
}

// The error of a refused Result or Status, every one bad input (exit 2 from the CLI).
template <typename T>
std::string error_of(const Result<T>& r) {
  if (r) return "ok";
  return r.error().code() == ErrorCode::kInvalidArgument ? r.error().to_string() : "wrong code";
}
std::string error_of(const Status& s) {
  return s.code() == ErrorCode::kInvalidArgument ? s.to_string() : "wrong code";
}

::testing::AssertionResult says(const std::string& error, std::string_view text) {
  if (error.find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << error << "\" lacks \"" << text << "\"";
}

TEST(SeedKvFile, EachWindowIsTheFilesTokensInOrderRotated) {
  const KvFileDims f{2, 1000, 2, 4};
  const auto ids = synthetic::tokens(3, 5000);
  for (uint32_t layer : {0u, 1u, 2u, 5u}) {
    for (uint32_t head : {0u, 1u, 3u}) {
      for (uint64_t window = 0; window < 5; ++window) {
        std::set<uint64_t> seen;
        for (uint64_t t = window * 1000; t < (window + 1) * 1000; ++t) {
          const uint64_t s = kv_file_token(f, ids.data(), t, layer, head);
          seen.insert(s);
          if (t % 1000 != 999) {
            EXPECT_EQ(kv_file_token(f, ids.data(), t + 1, layer, head), (s + 1) % 1000);
          }
        }
        EXPECT_EQ(seen.size(), 1000u) << "window " << window;
      }
    }
  }
  // The file's layer, head and K or V are the model's modulo the file's.
  const uint64_t s = kv_file_token(f, ids.data(), 1234, 5, 3);
  EXPECT_EQ(kv_file_head(f, ids.data(), 1, 1234, 5, 3), ((1 * 2 + 1) * 1000 + s) * 2 + 1);
}

TEST(SeedKvFile, PositionsLayersAndHeadsAFileLengthApartDiffer) {
  const KvFileDims f{4, 1000, 4, 128};
  const auto ids = synthetic::tokens(3, 3000);
  auto token = [&](uint64_t t, uint32_t layer, uint32_t head) {
    return kv_file_token(f, ids.data(), t, layer, head);
  };
  EXPECT_NE(token(10, 0, 0), token(1010, 0, 0));
  EXPECT_NE(token(10, 0, 0), token(10, 4, 0));
  EXPECT_NE(token(10, 0, 0), token(10, 0, 4));
  EXPECT_NE(token(10, 4, 0), token(10, 0, 4));
  // Within one repeat of the file's layers and heads a position is one file token, as in a
  // forward pass.
  EXPECT_EQ(token(10, 0, 0), token(10, 3, 2));
}

TEST(SeedKvFile, APositionDependsOnlyOnTheIdsUpToIt) {
  const KvFileDims f{2, 100, 2, 4};
  auto ids = synthetic::tokens(3, 1000);
  std::vector<uint64_t> before;
  for (uint64_t t = 0; t < 1000; ++t) before.push_back(kv_file_token(f, ids.data(), t, 3, 1));
  ids[500] ^= 1;  // a session that shares the first 500 tokens
  for (uint64_t t = 0; t < 500; ++t) EXPECT_EQ(kv_file_token(f, ids.data(), t, 3, 1), before[t]);
  bool differs = false;
  for (uint64_t t = 500; t < 600; ++t)
    differs = differs || kv_file_token(f, ids.data(), t, 3, 1) != before[t];
  EXPECT_TRUE(differs);
}

TEST(SeedKvFile, ProbeReadsTheSidecarAndRefusesAFileThatDisagrees) {
  testing::TempDir dir;
  const std::string path = write_kv_file(dir.path(), {2, 50, 2, 64});
  auto info = probe_kv_file(path);
  ASSERT_OK(info);
  EXPECT_EQ(info->dims.layers, 2u);
  EXPECT_EQ(info->dims.tokens, 50u);
  EXPECT_EQ(info->dims.heads, 2u);
  EXPECT_EQ(info->dims.head_dim, 64u);
  EXPECT_EQ(info->model, "test bytes, no model");
  EXPECT_EQ(kv_file_path("file:" + path).value(), path);
  EXPECT_FALSE(kv_file_path("bf16-like"));
  EXPECT_TRUE(says(error_of(probe_kv_file(path + ".missing")), "cannot be read"));
  std::filesystem::resize_file(path, 2 * 2 * 50 * 2 * 64 * 2 - 2);
  EXPECT_TRUE(says(error_of(probe_kv_file(path)), "the shape [2, 2, 50, 2, 64] of bfloat16"));
  write_kv_file(dir.path(), {2, 50, 2, 64}, "float16");
  EXPECT_TRUE(says(error_of(probe_kv_file(path)), "is not \"bfloat16\""));
  std::filesystem::remove(path + ".json");
  EXPECT_TRUE(says(error_of(probe_kv_file(path)), "kv.bin.json cannot be read"));
  std::ofstream(path + ".json") << R"({"shape": [2, 2, 50, 64], "dtype": "bfloat16"})";
  EXPECT_TRUE(
      says(error_of(probe_kv_file(path)), "is not [2, layers, tokens, kv_heads, head_dim]"));
}

TEST(SeedKvFile, AModelOfAnotherHeadDimOrALatentIsRefused) {
  testing::TempDir dir;
  auto info = probe_kv_file(write_kv_file(dir.path(), {1, 8, 1, 128}));
  ASSERT_OK(info);
  EXPECT_OK(kv_file_fits(*info, geometry_for("llama-3-8b", 1, 2).value()));
  EXPECT_TRUE(says(error_of(kv_file_fits(*info, testing::tiny_geometry())),
                   "its heads are 128 elements (shape [2, 1, 8, 1, 128]); tiny's "
                   "head_dim is 64"));
  auto mla = geometry_for("deepseek-v3").value();
  mla.head_dim = 128;
  EXPECT_TRUE(says(error_of(kv_file_fits(*info, mla)), "not K and V"));
  auto fp8 = geometry_for("llama-3-8b").value();
  fp8.element_bytes = 1;
  EXPECT_TRUE(says(error_of(kv_file_fits(*info, fp8)), "1-byte elements"));
  // The cache refuses it too, whatever made the source.
  auto source = load_kv_source("file:" + info->path);
  ASSERT_OK(source);
  EXPECT_EQ(BenchKv::create(testing::tiny_geometry(), 16, "host", 0, *source).error().code(),
            ErrorCode::kInvalidArgument);
}

TEST(SeedBenchKv, HostCacheRoundTripsFileKvAndFindsTheFirstChangedToken) {
  testing::TempDir dir;
  const KvGeometry g = testing::tiny_geometry();  // 2 layers of 2 heads of 64
  auto source = load_kv_source("file:" + write_kv_file(dir.path(), {1, 300, 1, 64}));
  ASSERT_OK(source);
  auto kv = BenchKv::create(g, 1000, "host", 0, *source);
  ASSERT_OK(kv);
  const auto ids = synthetic::tokens(5, 1000);
  ASSERT_OK((*kv)->prefill(ids));
  EXPECT_EQ((*kv)->first_mismatch(ids).value(), 1000u);
  EXPECT_EQ((*kv)->first_mismatch(std::span(ids).first(700)).value(), 700u);
  EXPECT_EQ((*kv)->first_mismatch(synthetic::tokens(6, 1000)).value(), 0u);
  // V of layer 1, head 1 at token 500 is the file's head kv_file_head names.
  const PagedKv& v = (*kv)->view();
  const uint64_t slot = uint64_t(v.block_table[500 / v.block_size]) * v.block_size + 500 % 16;
  std::byte* row =
      v.layers[1].data + (uint64_t{v.num_blocks} * v.block_size + slot) * g.row_bytes();
  const uint64_t head = kv_file_head(source->file->info.dims, ids.data(), 1, 500, 1, 1);
  EXPECT_EQ(std::memcmp(row + 128, source->file->bytes.data() + head * 128, 128), 0);
  row[128 + 5] ^= std::byte{1};
  EXPECT_EQ((*kv)->first_mismatch(ids).value(), 500u);
  ASSERT_OK((*kv)->poison());
  EXPECT_EQ((*kv)->first_mismatch(ids).value(), 0u);
}

// As for the synthetic KV: a TP-free store restores at one TP size what another saved, so a
// rank's file KV is its heads' slice of the whole model's, the file's heads repeated over them.
TEST(SeedBenchKv, FileKvOfARankIsItsHeadsSliceOfTheWholeModelsAtEveryTpSize) {
  constexpr uint64_t kTokens = 100;
  testing::TempDir dir;
  auto source = load_kv_source("file:" + write_kv_file(dir.path(), {3, 40, 3, 128}));
  ASSERT_OK(source);
  const auto ids = synthetic::tokens(9, kTokens);
  auto whole_g = geometry_for("llama-3-8b", 0, 1, 64);
  ASSERT_OK(whole_g);
  auto whole = BenchKv::create(*whole_g, kTokens, "host", 0, *source);
  ASSERT_OK(whole);
  ASSERT_OK((*whole)->prefill(ids));
  for (uint32_t world : {2u, 4u, 8u}) {
    for (uint32_t rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(::testing::Message() << "TP " << world << " rank " << rank);
      auto g = geometry_for("llama-3-8b", rank, world, 64);
      ASSERT_OK(g);
      auto part = BenchKv::create(*g, kTokens, "host", 0, *source);
      ASSERT_OK(part);
      ASSERT_OK((*part)->prefill(ids));
      EXPECT_EQ((*part)->first_mismatch(ids).value(), kTokens);
      const PagedKv& a = (*whole)->view();
      const PagedKv& b = (*part)->view();
      const uint64_t rows = uint64_t{2} * a.num_blocks * a.block_size;
      for (uint32_t l = 0; l < g->layers; ++l) {
        for (uint64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(std::memcmp(b.layers[l].data + r * g->row_bytes(),
                                a.layers[l].data + r * whole_g->row_bytes() +
                                    uint64_t{rank} * g->row_bytes(),
                                g->row_bytes()),
                    0)
              << "layer " << l << " row " << r;
        }
      }
    }
  }
}

// The CUDA kernels fill and check a word at a time through kv_file_word; the host cache copies
// whole heads through kv_file_head. Both must give the same bytes: checked here on the CPU for a
// rank whose row starts inside the model's (TP 4, rank 1), the file's heads repeated.
TEST(SeedBenchKv, TheKernelsWordAddressingOfFileKvIsTheHostCaches) {
  constexpr uint64_t kTokens = 200;
  testing::TempDir dir;
  auto source = load_kv_source("file:" + write_kv_file(dir.path(), {3, 70, 3, 128}));
  ASSERT_OK(source);
  const auto ids = synthetic::tokens(4, kTokens);
  auto g = geometry_for("llama-3-8b", 1, 4, 64);
  ASSERT_OK(g);
  auto kv = BenchKv::create(*g, kTokens, "host", 0, *source);
  ASSERT_OK(kv);
  ASSERT_OK((*kv)->prefill(ids));
  const PagedKv& v = (*kv)->view();
  auto file_word = [&](uint64_t at) {
    uint64_t word = 0;
    std::memcpy(&word, source->file->bytes.data() + at * 8, 8);
    return word;
  };
  const uint64_t first_word = synthetic::first_word(*g);
  ASSERT_GT(first_word, 0u);
  for (uint64_t t = 0; t < kTokens; t += 7) {
    const uint64_t slot = uint64_t(v.block_table[t / v.block_size]) * v.block_size + t % 16;
    for (uint32_t k = 0; k < 2; ++k) {
      for (uint32_t l = 0; l < g->layers; ++l) {
        const std::byte* row =
            v.layers[l].data + (uint64_t{k} * v.num_blocks * v.block_size + slot) * g->row_bytes();
        for (uint64_t w = 0; w < g->row_bytes() / 8; ++w) {
          uint64_t got = 0;
          std::memcpy(&got, row + w * 8, 8);
          ASSERT_EQ(got, file_word(kv_file_word(source->file->info.dims, ids.data(), k, t, l,
                                                first_word + w)))
              << "token " << t << " kv " << k << " layer " << l << " word " << w;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtier::seed
