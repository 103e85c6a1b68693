// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// TP-free stores (Options::store_format 2): KV saved by the ranks of one TP size is restored by the
// ranks of every other, each rank reading only its heads' records. Ranks are emulated in one
// process (every rank an Engine of its own over the same root); the model's whole KV is drawn at
// random and every rank's restore is compared with its heads' slice of it, byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <regex>
#include <vector>

#include "kvtier/kvtier.hpp"
#include "paged_reference.hpp"
#include "test_util.hpp"
#include "tp_reference.hpp"
#include "tp_restore.hpp"

namespace kvtier {
namespace {

using testing::TempDir;

using Model = testing::TpModel;
using testing::host_kv;
using testing::rank_slice;
using testing::token_run;

/// The model's KV of the session, [2, layers, tokens, heads, head_dim], random bytes.
std::vector<std::byte> whole_kv(const Model& m, std::mt19937_64& rng) {
  std::vector<std::byte> kv(m.kv_tensors * m.layers * m.tokens * m.heads * m.head_bytes());
  for (auto& b : kv) b = static_cast<std::byte>(rng());
  return kv;
}

Options options_for(const std::string& root, const KvGeometry& g, uint32_t max_tp) {
  return testing::tp_free_options(root, g, max_tp, 512ull << 20);
}

void save_at(const std::string& root, const Model& m, const std::vector<std::byte>& whole,
             const std::vector<Token>& tokens, uint32_t tp) {
  for (uint32_t r = 0; r < tp; ++r) {
    auto engine = Engine::open(options_for(root, m.rank(r, tp), m.max_tp));
    ASSERT_TRUE(engine) << engine.error().message();
    std::vector<std::byte> slice = rank_slice(m, whole, r, tp);
    const ChunkedKv kv = host_kv(slice, m.tokens);
    auto saved = (*engine)->save(tokens, kv);
    ASSERT_TRUE(saved) << saved.error().message();
    ASSERT_EQ(saved->tokens_stored, m.tokens);
  }
}

/// Restores the session at TP `tp` (rank by rank, each into its own memory, contiguous or in a
/// paged layout) and compares every byte with the rank's slice; returns the bytes each rank read.
std::vector<uint64_t> restore_at(const std::string& root, const Model& m,
                                 const std::vector<std::byte>& whole,
                                 const std::vector<Token>& tokens, uint32_t tp,
                                 std::mt19937_64& rng) {
  std::vector<uint64_t> read;
  for (uint32_t r = 0; r < tp; ++r) {
    const KvGeometry g = m.rank(r, tp);
    auto engine = Engine::open(options_for(root, g, m.max_tp));
    EXPECT_TRUE(engine) << engine.error().message();
    if (!engine) return read;
    auto held = (*engine)->lookup(tokens);
    EXPECT_TRUE(held && *held == m.tokens) << "rank " << r << " of TP " << tp;
    const std::vector<std::byte> want = rank_slice(m, whole, r, tp);
    auto [got, restored] = testing::restore_rank(**engine, m, tokens, r, tp, rng);
    EXPECT_EQ(restored.tokens_restored, m.tokens) << restored.problem;
    read.push_back(restored.bytes_read);
    EXPECT_TRUE(got == want) << "rank " << r << " of TP " << tp << " restored other bytes";
  }
  return read;
}

TEST(TpFreeStore, EveryTpSizeRestoresWhatEveryOtherSaved) {
  std::mt19937_64 rng(testing::test_seed());
  const uint32_t kHeads[] = {1, 2, 3, 4, 6, 8, 12, 16, 32};
  uint64_t pairs = 0, models = 0;
  for (int round = 0; round < 8; ++round) {
    Model m;
    m.heads = kHeads[rng() % std::size(kHeads)];
    m.layers = 1 + static_cast<uint32_t>(rng() % 3);
    m.head_dim = 8 * (1 + static_cast<uint32_t>(rng() % 4));
    m.element_bytes = rng() % 2 == 0 ? 2 : 1;
    m.chunk = 4 + static_cast<uint32_t>(rng() % 29);
    m.max_tp = rng() % 4 == 0 ? 4 : 8;
    m.tokens = 1 + rng() % (5 * m.chunk);
    if (round == 7) {  // an MLA latent: one head every rank holds
      m.heads = 1;
      m.kv_tensors = 1;
    }
    const std::vector<uint32_t> sizes = m.tp_sizes();
    std::vector<std::byte> whole = whole_kv(m, rng);
    std::vector<Token> tokens(m.tokens);
    for (auto& t : tokens) t = static_cast<Token>(rng() % 50000);
    for (uint32_t a : sizes) {
      TempDir dir;
      save_at(dir.str(), m, whole, tokens, a);
      for (uint32_t b : sizes) {
        SCOPED_TRACE(::testing::Message()
                     << "heads " << m.heads << " tensors " << m.kv_tensors << " layers " << m.layers
                     << " head_dim " << m.head_dim << " element bytes " << m.element_bytes
                     << " chunk " << m.chunk << " max_tp " << m.max_tp << " tokens " << m.tokens
                     << ": saved at TP " << a << ", restored at TP " << b);
        const std::vector<uint64_t> read = restore_at(dir.str(), m, whole, tokens, b, rng);
        ASSERT_EQ(read.size(), b);
        // Each rank reads its heads' records and nothing else: an equal share (a replicated head's
        // record is read by every rank that holds it).
        for (uint64_t bytes : read) EXPECT_EQ(bytes, read[0]);
        ++pairs;
      }
    }
    ++models;
  }
  std::printf("TP-free: %llu models, %llu (save TP, restore TP) pairs, every byte compared\n",
              static_cast<unsigned long long>(models), static_cast<unsigned long long>(pairs));
}

TEST(TpFreeStore, ARankReadsOnlyItsHeadsShare) {
  Model m{.heads = 8,
          .layers = 2,
          .head_dim = 16,
          .element_bytes = 2,
          .chunk = 16,
          .max_tp = 8,
          .tokens = 64};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 7);
  TempDir dir;
  save_at(dir.str(), m, whole, tokens, 1);
  const std::vector<uint64_t> one = restore_at(dir.str(), m, whole, tokens, 1, rng);
  const std::vector<uint64_t> eight = restore_at(dir.str(), m, whole, tokens, 8, rng);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(eight.size(), 8u);
  // 4 chunks x 8 groups, each record a 4 KiB header and its group's payload (4 KiB here).
  EXPECT_EQ(one[0], 4u * 8 * (4096 + 4096));
  for (uint64_t bytes : eight) EXPECT_EQ(bytes, one[0] / 8);
}

TEST(TpFreeStore, ASessionIsHeldOnlyAsFarAsEveryGroupHoldsIt) {
  Model m{.heads = 4,
          .layers = 1,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 8,
          .tokens = 40};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 1);
  TempDir dir;
  // Only rank 0 of TP 2 saved (rank 1 crashed before its save): heads 2 and 3 are missing.
  {
    auto engine = Engine::open(options_for(dir.str(), m.rank(0, 2), m.max_tp));
    ASSERT_TRUE(engine);
    std::vector<std::byte> slice = rank_slice(m, whole, 0, 2);
    ASSERT_TRUE((*engine)->save(tokens, host_kv(slice, m.tokens)));
  }
  auto whole_rank = Engine::open(options_for(dir.str(), m.rank(0, 1), m.max_tp));
  ASSERT_TRUE(whole_rank);
  // Heads 0 and 1 alone are no session.
  EXPECT_EQ(*(*whole_rank)->lookup(tokens), 0u);
  std::vector<std::byte> got(whole.size());
  auto restored = (*whole_rank)->restore(tokens, host_kv(got, m.tokens));
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->tokens_restored, 0u);
  whole_rank->reset();  // a group has one writer at a time
  // The TP-4 ranks holding heads 0 and 1 find the session whole.
  for (uint32_t r = 0; r < 2; ++r) {
    auto engine = Engine::open(options_for(dir.str(), m.rank(r, 4), m.max_tp));
    ASSERT_TRUE(engine) << engine.error().message();
    EXPECT_EQ(*(*engine)->lookup(tokens), m.tokens);
  }
}

TEST(TpFreeStore, RefusesTpSizesItCannotServeAndSaysWhy) {
  TempDir dir;
  Model m{.heads = 2,
          .layers = 1,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 8,
          .tokens = 8};
  // More ranks than KV heads: rank 1 of TP 4 reads head 0, which rank 0 writes; without rank 0's
  // store it waits for it, then says whose it is.
  Options follower = options_for(dir.str(), m.rank(1, 4), 8);
  follower.writer_wait_ms = 200;
  auto alone = Engine::open(follower);
  ASSERT_FALSE(alone);
  EXPECT_EQ(alone.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(alone.error().message().find("the lowest rank holding it writes"), std::string::npos)
      << alone.error().message();
  // A TP size past max_tp.
  Model four{.heads = 4,
             .layers = 1,
             .head_dim = 8,
             .element_bytes = 2,
             .chunk = 8,
             .max_tp = 2,
             .tokens = 8};
  auto split = Engine::open(options_for(dir.str(), four.rank(0, 4), 2));
  ASSERT_FALSE(split);
  EXPECT_EQ(split.error().code(), ErrorCode::kInvalidArgument);
  // kv_heads that is not the rank's share of the model's heads.
  Options o = options_for(dir.str(), m.rank(0, 2), 8);
  o.geometry.kv_heads_total = 4;  // two ranks of one head each hold 2 of them, not 4
  auto wrong = Engine::open(o);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code(), ErrorCode::kInvalidArgument);
  // A TP size that does not divide max_tp.
  Model six{.heads = 6,
            .layers = 1,
            .head_dim = 8,
            .element_bytes = 2,
            .chunk = 8,
            .max_tp = 8,
            .tokens = 8};
  auto three = Engine::open(options_for(dir.str(), six.rank(0, 3), 8));
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().code(), ErrorCode::kInvalidArgument);
  // store_format and max_tp out of range.
  o = options_for(dir.str(), m.rank(0, 1), 8);
  o.store_format = 3;
  EXPECT_EQ(Engine::open(o).error().code(), ErrorCode::kInvalidArgument);
  o.store_format = 2;
  o.max_tp = 6;
  EXPECT_EQ(Engine::open(o).error().code(), ErrorCode::kInvalidArgument);
}

TEST(TpFreeStore, AFormatOneStoreBesideItIsLeftAlone) {
  Model m{.heads = 4,
          .layers = 2,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 8,
          .tokens = 24};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 3);
  TempDir dir;
  save_at(dir.str(), m, whole, tokens, 2);
  // The same rank with a store per rank (format 1) sees none of it, and writes its own.
  Options one = options_for(dir.str(), m.rank(0, 2), 8);
  one.store_format = 1;
  auto f1 = Engine::open(one);
  ASSERT_TRUE(f1) << f1.error().message();
  EXPECT_EQ(*(*f1)->lookup(tokens), 0u);
  EXPECT_NE((*f1)->store_dir().find("rank0of2"), std::string::npos);
  const std::vector<uint64_t> read = restore_at(dir.str(), m, whole, tokens, 4, rng);
  EXPECT_EQ(read.size(), 4u);
}

TEST(TpFreeStore, GroupStoresAreFormatTwoAndRebuildTheirIndexFromTheirHeaders) {
  Model m{.heads = 4,
          .layers = 2,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 8,
          .tokens = 45};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 11);
  TempDir dir;
  save_at(dir.str(), m, whole, tokens, 4);
  // Every group directory: a format-2 manifest and records whose headers say KVTREC02. Its index
  // lost, each store walks its segments' headers to find its records again.
  size_t groups = 0;
  for (const auto& model : std::filesystem::directory_iterator(dir.path() / "kvtier2")) {
    for (const auto& group : std::filesystem::directory_iterator(model.path())) {
      ++groups;
      std::ifstream manifest(group.path() / "MANIFEST.json");
      const std::string text((std::istreambuf_iterator<char>(manifest)),
                             std::istreambuf_iterator<char>());
      EXPECT_TRUE(std::regex_search(text, std::regex(R"("format_version"\s*:\s*2\b)"))) << text;
      for (const auto& f : std::filesystem::directory_iterator(group.path())) {
        const std::string name = f.path().filename().string();
        if (name.starts_with("seg-")) {
          std::ifstream seg(f.path(), std::ios::binary);
          char magic[8] = {};
          seg.read(magic, 8);
          EXPECT_EQ(std::string(magic, 8), "KVTREC02") << f.path();
        }
        if (name.starts_with("index.")) std::filesystem::remove(f.path());
      }
    }
  }
  EXPECT_EQ(groups, 4u);
  const std::vector<uint64_t> read = restore_at(dir.str(), m, whole, tokens, 2, rng);
  EXPECT_EQ(read.size(), 2u);
}

TEST(TpFreeStore, RanksReplicatingAHeadFollowItsWriterAndTheStoreHoldsOneCopy) {
  // One KV head (MQA) at TP 8: rank 0 writes the head's group, ranks 1-7 follow it, all open
  // before anything is saved; every rank then restores sessions saved after it opened.
  Model m{.heads = 1,
          .layers = 2,
          .head_dim = 16,
          .element_bytes = 2,
          .chunk = 16,
          .max_tp = 8,
          .tokens = 70};
  std::mt19937_64 rng(testing::test_seed());
  TempDir dir;
  std::vector<std::unique_ptr<Engine>> ranks;
  for (uint32_t r = 0; r < 8; ++r) {
    auto e = Engine::open(options_for(dir.str(), m.rank(r, 8), m.max_tp));
    ASSERT_TRUE(e) << e.error().message();
    ranks.push_back(std::move(*e));
  }
  // Followers opened before any segment existed read the way the writer does.
  for (uint32_t r = 1; r < 8; ++r) {
    EXPECT_EQ(ranks[r]->stats().io_engine, ranks[0]->stats().io_engine) << "rank " << r;
  }
  std::vector<Token> tokens(m.tokens);
  for (int session = 0; session < 3; ++session) {
    const std::vector<std::byte> whole = whole_kv(m, rng);
    for (auto& t : tokens) t = static_cast<Token>(rng() % 90000);
    // Every rank saves what it holds, as vLLM's workers do; followers write nothing.
    for (uint32_t r = 0; r < 8; ++r) {
      std::vector<std::byte> slice = rank_slice(m, whole, r, 8);
      auto saved = ranks[r]->save(tokens, host_kv(slice, m.tokens));
      ASSERT_TRUE(saved) << saved.error().message();
      EXPECT_EQ(saved->tokens_stored, m.tokens) << "rank " << r;
      EXPECT_EQ(saved->chunks_written, r == 0 ? 5u : 0u) << "rank " << r;
    }
    for (uint32_t r = 0; r < 8; ++r) {
      EXPECT_EQ(*ranks[r]->lookup(tokens), m.tokens) << "rank " << r;
      std::vector<std::byte> got(rank_slice(m, whole, r, 8).size());
      auto restored = ranks[r]->restore(tokens, host_kv(got, m.tokens));
      ASSERT_TRUE(restored) << restored.error().message();
      EXPECT_EQ(restored->tokens_restored, m.tokens) << "rank " << r << ": " << restored->problem;
      EXPECT_TRUE(got == rank_slice(m, whole, r, 8)) << "rank " << r << " session " << session;
    }
  }
  // One copy: the one group's live bytes are three sessions of one head, whatever the TP size.
  const Stats writer = ranks[0]->stats();
  EXPECT_EQ(writer.records, 15u);
  for (uint32_t r = 1; r < 8; ++r) EXPECT_EQ(ranks[r]->stats().records, 15u) << "rank " << r;
  // Evicting is the writer's: a follower's evict drops nothing and fails nothing; once the writer
  // evicted the last session, no rank finds it.
  EXPECT_EQ(*ranks[3]->evict(tokens), 0u);
  EXPECT_EQ(*ranks[0]->evict(tokens), 5u);
  for (uint32_t r = 0; r < 8; ++r) EXPECT_EQ(*ranks[r]->lookup(tokens), 0u) << "rank " << r;
  // A TP-1 engine of the same model finds the rest once the writers are gone.
  ranks.clear();
  auto one = Engine::open(options_for(dir.str(), m.rank(0, 1), m.max_tp));
  ASSERT_TRUE(one) << one.error().message();
  EXPECT_EQ((*one)->stats().records, 10u);
}

TEST(TpFreeStore, CapacityAndDramAreSharedOverTheGroupsAndAStoresOwnCapacityIsKept) {
  Model m{.heads = 8,
          .layers = 1,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 8,
          .tokens = 16};
  const std::vector<Token> tokens = token_run(m.tokens, 5);
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  TempDir dir;
  Options o = options_for(dir.str(), m.rank(0, 1), 8);
  o.capacity_bytes = 8ull << 30;
  o.segment_bytes = 16 << 20;  // preallocated whole: the default would take 2 GiB of disk here
  {
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ((*e)->stats().capacity_bytes, 8ull << 30);  // 1 GiB for each of 8 groups
    // The rank's staging is split over its groups' stores, which restore at once.
    const IoSettings io = (*e)->io_settings();
    EXPECT_EQ(io.staging_bytes, o.staging_bytes);
    // 64 KiB requests, one for each of 8 stores, would pass the 256 KiB asked for: smaller ones.
    EXPECT_EQ(io.request_bytes, o.io_request_bytes / 2);
    EXPECT_NE(io.source.find("options (staging split over 8 head-group stores, in requests of "
                             "32 KiB: one of 64 KiB each would pass it)"),
              std::string::npos)
        << io.source;
    std::vector<std::byte> slice = rank_slice(m, whole, 0, 1);
    ASSERT_TRUE((*e)->save(tokens, host_kv(slice, m.tokens)));
  }
  // Not asked for: each group store keeps its own, also across a save.
  o.capacity_bytes = 0;
  {
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    std::vector<std::byte> slice = rank_slice(m, whole, 0, 1);
    ASSERT_TRUE((*e)->save(tokens, host_kv(slice, m.tokens)));
    EXPECT_EQ((*e)->stats().capacity_bytes, 8ull << 30);
  }
  // A new store unasked: the default (64 GiB) over the groups, as a store per rank would have it.
  TempDir fresh;
  Options unasked = options_for(fresh.str(), m.rank(0, 1), 8);
  unasked.capacity_bytes = 0;
  auto e = Engine::open(unasked);
  ASSERT_TRUE(e) << e.error().message();
  EXPECT_EQ((*e)->stats().capacity_bytes, 64ull << 30);
  e->reset();
  // Bounds a store per rank would take but that are too small to split say so, naming the
  // groups, instead of turning into defaults.
  TempDir other;
  Options tiny = options_for(other.str(), m.rank(0, 1), 8);
  tiny.capacity_bytes = 64 << 20;  // 8 MiB a group: less than one 16 MiB segment
  auto small = Engine::open(tiny);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message().find("head group"), std::string::npos)
      << small.error().message();
  Options dram = options_for(other.str(), m.rank(0, 1), 8);
  dram.dram_bytes = 16 << 10;  // 2 KiB a group: not one record
  auto no_room = Engine::open(dram);
  ASSERT_FALSE(no_room);
  EXPECT_NE(no_room.error().message().find("head group"), std::string::npos)
      << no_room.error().message();
  dram.dram_bytes = 1 << 20;  // 128 KiB a group: kept, and used
  auto kept = Engine::open(dram);
  ASSERT_TRUE(kept) << kept.error().message();
  std::vector<std::byte> slice = rank_slice(m, whole, 0, 1);
  ASSERT_TRUE((*kept)->save(tokens, host_kv(slice, m.tokens)));
  EXPECT_EQ((*kept)->stats().dram_records, 16u);  // 2 chunks x 8 groups
}

// A rank's staging split over more stores than it holds requests for (8 groups, one 64 KiB
// request each would be 512 KiB against 256 KiB): the stores read with smaller requests, keeping
// to the staging asked for, and serve every byte.
TEST(TpFreeStore, StagingTooSmallForARequestPerStoreShrinksTheRequestsNotTheBound) {
  Model m{.heads = 8,
          .layers = 4,
          .head_dim = 128,
          .element_bytes = 2,
          .chunk = 64,  // records of 128 KiB: several requests each
          .max_tp = 8,
          .tokens = 300};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 3);
  TempDir dir;
  Options o = options_for(dir.str(), m.rank(0, 1), m.max_tp);
  ASSERT_EQ(o.io_request_bytes, 64u << 10);
  ASSERT_EQ(o.staging_bytes, 256u << 10);
  auto e = Engine::open(o);
  ASSERT_TRUE(e) << e.error().message();
  const IoSettings io = (*e)->io_settings();
  EXPECT_EQ(io.staging_bytes, 256u << 10);
  EXPECT_EQ(io.request_bytes, 32u << 10);
  EXPECT_NE(io.source.find("in requests of 32 KiB: one of 64 KiB each would pass it"),
            std::string::npos)
      << io.source;
  std::vector<std::byte> slice = rank_slice(m, whole, 0, 1);
  ASSERT_TRUE((*e)->save(tokens, host_kv(slice, m.tokens)));
  std::vector<std::byte> got(slice.size());
  auto r = (*e)->restore(tokens, host_kv(got, m.tokens));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->tokens_restored, m.tokens);
  EXPECT_TRUE(got == slice);
}

// The same at kvtier's defaults (16 MiB requests, 128 MiB a rank), tuning on and nothing to probe
// yet, over 16 head groups: 8 MiB requests, and io_settings says so against the defaults' own.
TEST(TpFreeStore, TheDefaultsSplitOverManyGroupsSayTheSmallerRequest) {
  Model m{.heads = 16,
          .layers = 1,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 16,
          .tokens = 16};
  TempDir dir;
  Options o = options_for(dir.str(), m.rank(0, 1), m.max_tp);
  o.io_request_bytes = 0;
  o.staging_bytes = 0;
  o.tune = true;
  o.segment_bytes = 16 << 20;
  auto e = Engine::open(o);
  ASSERT_TRUE(e) << e.error().message();
  const IoSettings io = (*e)->io_settings();
  EXPECT_EQ(io.request_bytes, 8u << 20);
  EXPECT_EQ(io.staging_bytes, 128u << 20);
  EXPECT_NE(io.source.find("defaults (staging split over 16 head-group stores, in requests of 8 "
                           "MiB: one of 16 MiB each would pass it)"),
            std::string::npos)
      << io.source;
}

TEST(TpFreeStore, StatsCountWhatTheCallsDelivered) {
  Model m{.heads = 4,
          .layers = 1,
          .head_dim = 8,
          .element_bytes = 2,
          .chunk = 8,
          .max_tp = 8,
          .tokens = 40};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 1);
  TempDir dir;
  save_at(dir.str(), m, whole, tokens, 1);
  {
    // Rank 1 of TP 2 drops its heads' records of the session's tail: TP 1 finds 16 tokens.
    auto e = Engine::open(options_for(dir.str(), m.rank(1, 2), m.max_tp));
    ASSERT_TRUE(e);
    ASSERT_TRUE((*e)->evict(tokens));
    std::vector<std::byte> slice = rank_slice(m, whole, 1, 2);
    ASSERT_TRUE((*e)->save(std::span(tokens).first(16), host_kv(slice, m.tokens)));
  }
  auto e = Engine::open(options_for(dir.str(), m.rank(0, 1), m.max_tp));
  ASSERT_TRUE(e);
  EXPECT_EQ(*(*e)->lookup(tokens), 16u);
  std::vector<std::byte> got(whole.size());
  auto r = (*e)->restore(tokens, host_kv(got, m.tokens));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokens_restored, 16u);
  const Stats s = (*e)->stats();
  EXPECT_EQ(s.lookup_hit_tokens, 16u);
  EXPECT_EQ(s.tokens_restored, 16u);
  EXPECT_EQ(s.bytes_restored, 16 * m.rank(0, 1).bytes_per_token());
  EXPECT_EQ(s.lookups, 1u);
  EXPECT_EQ(s.restores, 1u);
}

TEST(TpFreeStore, AnMlaLatentIsStoredOnceAndServedToEveryRankAndTpSize) {
  // MLA: one latent per token and layer (kv_tensors 1), the same on every rank.
  Model m{.heads = 1,
          .layers = 3,
          .head_dim = 48,
          .element_bytes = 2,
          .chunk = 16,
          .max_tp = 8,
          .tokens = 100,
          .kv_tensors = 1};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  std::vector<Token> tokens(m.tokens);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 70000);
  TempDir dir;
  save_at(dir.str(), m, whole, tokens, 8);
  // One copy: 7 chunk records, written by rank 0; a TP-8 store per rank would hold 8 of each.
  for (uint32_t tp : {1u, 2u, 4u, 8u}) {
    auto e = Engine::open(options_for(dir.str(), m.rank(0, tp), m.max_tp));
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ((*e)->stats().records, 7u);
    // A 4 KiB header each, 16 tokens x 3 layers x 96 bytes padded to 8 KiB, the 4-token tail to 4.
    EXPECT_EQ((*e)->stats().live_bytes, 7u * 4096 + 6 * 8192 + 4096);
  }
  EXPECT_EQ(restore_at(dir.str(), m, whole, tokens, 4, rng).size(), 4u);
  // Into vLLM's MLA cache, [num_blocks, block_size, latent] per layer: the kv_first layout with
  // one tensor.
  const KvGeometry g = m.rank(2, 4);
  auto e = Engine::open(options_for(dir.str(), g, m.max_tp));
  ASSERT_TRUE(e);
  const uint32_t bs = 16, blocks = 9;
  const uint64_t row = m.head_bytes();
  std::vector<std::vector<std::byte>> layers(m.layers, std::vector<std::byte>(blocks * bs * row));
  PagedKv paged;
  for (auto& l : layers) paged.layers.push_back({l.data(), l.size(), MemoryKind::kHost, 0});
  const std::vector<int32_t> table = testing::shuffled_blocks(m.tokens, bs, blocks, rng());
  paged.block_table = table;
  paged.block_size = bs;
  paged.num_blocks = blocks;
  paged.layout = PagedLayout::kKvFirst;
  auto r = (*e)->restore(tokens, paged);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->tokens_restored, m.tokens);
  for (uint32_t l = 0; l < m.layers; ++l) {
    for (uint64_t t = 0; t < m.tokens; ++t) {
      const std::byte* got = layers[l].data() + (table[t / bs] * uint64_t{bs} + t % bs) * row;
      ASSERT_EQ(std::memcmp(got, whole.data() + (l * m.tokens + t) * row, row), 0)
          << "layer " << l << " token " << t;
    }
  }
  // A latent packed as K|V, or kept in a store per rank, is refused.
  paged.layout = PagedLayout::kPackedTokens;
  EXPECT_EQ((*e)->restore(tokens, paged).error().code(), ErrorCode::kInvalidArgument);
  Options one = options_for(dir.str(), g, m.max_tp);
  one.store_format = 1;
  EXPECT_EQ(Engine::open(one).error().code(), ErrorCode::kInvalidArgument);
}

TEST(TpFreeStore, ACorruptRecordIsAMissForAFollowerNotAnError) {
  Model m{.heads = 1,
          .layers = 1,
          .head_dim = 16,
          .element_bytes = 2,
          .chunk = 16,
          .max_tp = 8,
          .tokens = 48};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> tokens = token_run(m.tokens, 9);
  TempDir dir;
  auto writer = Engine::open(options_for(dir.str(), m.rank(0, 2), m.max_tp));
  auto follower = Engine::open(options_for(dir.str(), m.rank(1, 2), m.max_tp));
  ASSERT_TRUE(writer && follower);
  std::vector<std::byte> slice = rank_slice(m, whole, 0, 2);
  ASSERT_TRUE((*writer)->save(tokens, host_kv(slice, m.tokens)));
  // One byte of the third record's payload (records of 4 KiB header + 4 KiB padded payload).
  std::filesystem::path segment;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path() / "kvtier2")) {
    if (f.path().filename().string().starts_with("seg-")) segment = f.path();
  }
  ASSERT_FALSE(segment.empty());
  {
    std::fstream file(segment, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(2 * 8192 + 4096 + 100);
    char c = 0;
    file.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    file.seekp(2 * 8192 + 4096 + 100);
    file.write(&c, 1);
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<std::byte> got(slice.size());
    auto r = (*follower)->restore(tokens, host_kv(got, m.tokens));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->tokens_restored, 32u) << "attempt " << attempt;
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + 32 * 32, slice.begin()));
  }
  // The writer, reading it itself, drops it on disk; a new snapshot no longer holds it.
  std::vector<std::byte> got(slice.size());
  auto r = (*writer)->restore(tokens, host_kv(got, m.tokens));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokens_restored, 32u);
  EXPECT_EQ(r->checksum_misses, 1u);
  EXPECT_EQ((*writer)->stats().records, 2u);
  EXPECT_EQ(*(*follower)->lookup(tokens), 32u);
}

TEST(TpFreeStore, AFormat1StoreBesideIsServedReadOnlyToRanksOfItsTpSize) {
  Model m{.heads = 4, .layers = 2, .head_dim = 8, .element_bytes = 2, .chunk = 8, .tokens = 37};
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::byte> whole = whole_kv(m, rng);
  const std::vector<Token> old_session = token_run(m.tokens, 10);
  const std::vector<Token> new_session = token_run(m.tokens, 5000);
  TempDir dir;
  auto format1 = [&](uint32_t r) {
    Options o = options_for(dir.str(), m.rank(r, 2), m.max_tp);
    o.store_format = 1;
    o.geometry.kv_heads_total = 0;
    return o;
  };
  for (uint32_t r = 0; r < 2; ++r) {  // a TP-2 deployment of format 1
    auto e = Engine::open(format1(r));
    ASSERT_TRUE(e) << e.error().message();
    std::vector<std::byte> slice = rank_slice(m, whole, r, 2);
    ASSERT_TRUE((*e)->save(old_session, host_kv(slice, m.tokens)));
  }
  for (uint32_t r = 0; r < 2; ++r) {
    std::vector<std::string> lines;
    Options o = options_for(dir.str(), m.rank(r, 2), m.max_tp);
    o.log_sink = [&](LogLevel, std::string_view line) { lines.emplace_back(line); };
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("is a format-1 store"), std::string::npos) << lines[0];
    EXPECT_EQ(*(*e)->lookup(old_session), m.tokens);
    const std::vector<std::byte> want = rank_slice(m, whole, r, 2);
    std::vector<std::byte> got(want.size());
    auto restored = (*e)->restore(old_session, host_kv(got, m.tokens));
    ASSERT_TRUE(restored) << restored.error().message();
    EXPECT_EQ(restored->tokens_restored, m.tokens);
    EXPECT_TRUE(got == want);
    EXPECT_EQ((*e)->stats().tokens_restored, m.tokens);
    // New saves go to the TP-free store; the format-1 one is read only.
    std::vector<std::byte> slice = want;
    ASSERT_TRUE((*e)->save(new_session, host_kv(slice, m.tokens)));
    EXPECT_EQ(*(*e)->lookup(new_session), m.tokens);
  }
  {
    auto e = Engine::open(format1(0));
    ASSERT_TRUE(e);
    EXPECT_EQ(*(*e)->lookup(new_session), 0u) << "a save went into the format-1 store";
    EXPECT_EQ(*(*e)->lookup(old_session), m.tokens);
  }
  // A TP-free engine asking for another segment size still serves the old store, as it is.
  {
    Options o = options_for(dir.str(), m.rank(0, 2), m.max_tp);
    o.segment_bytes = 32 << 20;
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ(*(*e)->lookup(old_session), m.tokens);
  }
  // A record of the old store that fails its check: the TP-free store serves what it holds of
  // the session (24 tokens, saved there meanwhile), byte-exact.
  {
    auto e = Engine::open(options_for(dir.str(), m.rank(0, 2), m.max_tp));
    ASSERT_TRUE(e);
    std::vector<std::byte> slice = rank_slice(m, whole, 0, 2);
    ASSERT_TRUE(
        (*e)->save(std::span<const Token>(old_session.data(), 24), host_kv(slice, m.tokens)));
  }
  uint64_t flipped = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "rank0of2")) {
    if (entry.path().extension() != ".kvt") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = 2 * 8192 + 4096 + 5;  // record 2's payload (8 KiB records here)
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x10));
    ++flipped;
  }
  ASSERT_EQ(flipped, 1u);
  {
    auto e = Engine::open(options_for(dir.str(), m.rank(0, 2), m.max_tp));
    ASSERT_TRUE(e);
    const std::vector<std::byte> want = rank_slice(m, whole, 0, 2);
    std::vector<std::byte> got(want.size(), std::byte{0});
    auto restored = (*e)->restore(old_session, host_kv(got, m.tokens));
    ASSERT_TRUE(restored) << restored.error().message();
    EXPECT_EQ(restored->tokens_restored, 24u) << restored->problem;
    const uint64_t row = m.rank(0, 2).row_bytes();
    for (uint64_t line = 0; line < 2 * m.layers; ++line) {
      EXPECT_EQ(std::memcmp(got.data() + line * m.tokens * row, want.data() + line * m.tokens * row,
                            24 * row),
                0);
    }
  }
  // Another TP size reads the TP-free store only: the new session, and of the old one the 24
  // tokens rank 0 of TP 2 saved there (its heads include rank 0 of TP 4's), not the format-1 37.
  auto four = Engine::open(options_for(dir.str(), m.rank(0, 4), m.max_tp));
  ASSERT_TRUE(four);
  EXPECT_EQ(*(*four)->lookup(old_session), 24u);
  EXPECT_EQ(*(*four)->lookup(new_session), m.tokens);
  four->reset();
  // A format-1 store that cannot be read is said and left alone; the TP-free store opens.
  { std::ofstream(dir.path() / "rank1of2" / "MANIFEST.json", std::ios::trunc) << "{ not json"; }
  std::vector<std::string> lines;
  Options o = options_for(dir.str(), m.rank(1, 2), m.max_tp);
  o.log_sink = [&](LogLevel, std::string_view line) { lines.emplace_back(line); };
  auto e = Engine::open(o);
  ASSERT_TRUE(e) << e.error().message();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("cannot be read"), std::string::npos) << lines[0];
  EXPECT_EQ(*(*e)->lookup(old_session), 0u);
  EXPECT_EQ(*(*e)->lookup(new_session), m.tokens);
}

}  // namespace
}  // namespace kvtier
