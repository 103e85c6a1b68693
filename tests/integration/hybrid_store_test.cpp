// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Hybrid models in TP-free stores (docs/format.md "Hybrid models"): full-attention layers keep all
// of a session's KV, sliding-window layers only the last window before its end, recurrent layers
// their state at the end. Ranks of every TP size are emulated in one process; the model's whole
// KV and every rank's state are drawn at random and every byte a restore writes is compared, as
// are the bytes it must leave alone (window layers' tokens before the window).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "hybrid_model.hpp"
#include "kvtier/kvtier.hpp"
#include "paged_reference.hpp"
#include "test_util.hpp"
#include "tp_reference.hpp"

namespace kvtier {
namespace {

using testing::draw_model;
using testing::draw_session;
using testing::expect_rows;
using testing::Hybrid;
using testing::kUntouched;
using testing::random_bytes;
using testing::rank_kv;
using testing::restore_rank;
using testing::save_rank;
using testing::state_view;
using testing::TempDir;
using Session = testing::HybridSession;

Options options_for(const std::string& root, const KvGeometry& g, uint32_t max_tp) {
  // Every rank's state store gets 1/(stores x TP) of the capacity, at least one 16 MiB segment.
  // Segments are preallocated whole: at their default size (a quarter of a store's share) a
  // rank's dozen stores would take gigabytes of the test machine's disk.
  Options o = testing::tp_free_options(root, g, max_tp, 4ull << 30);
  o.segment_bytes = 16 << 20;
  return o;
}

std::unique_ptr<Engine> open_rank(const std::string& root, const Hybrid& m, uint32_t r,
                                  uint32_t tp) {
  auto e = Engine::open(options_for(root, m.rank(r, tp), m.max_tp));
  EXPECT_TRUE(e) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

void save_at(const std::string& root, const Hybrid& m, const Session& s, uint32_t tp) {
  for (uint32_t r = 0; r < tp; ++r) {
    std::unique_ptr<Engine> e = open_rank(root, m, r, tp);
    ASSERT_TRUE(e);
    save_rank(*e, m, s, r, tp);
  }
}

/// Restores at TP `tp`, rank by rank (restore_rank). `saved_tp`: the TP size whose ranks' states
/// were kept.
void restore_at(const std::string& root, const Hybrid& m, const Session& s, uint32_t tp,
                uint32_t saved_tp, std::mt19937_64& rng) {
  // A state is its rank's: a TP size other than the saver's finds none, and so no boundary.
  const uint64_t want_tokens = m.state_layers > 0 && tp != saved_tp ? 0 : s.tokens.size();
  for (uint32_t r = 0; r < tp; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r << " of TP " << tp);
    std::unique_ptr<Engine> e = open_rank(root, m, r, tp);
    ASSERT_TRUE(e);
    restore_rank(*e, m, s, r, tp, want_tokens, rng);
  }
}

TEST(HybridStore, EveryTpSizeRestoresWhatEveryOtherSavedKvWindowAndState) {
  std::mt19937_64 rng(testing::test_seed());
  uint64_t pairs = 0, models = 0, with_state = 0;
  for (int round = 0; round < 10; ++round) {
    const Hybrid m = draw_model(rng);
    for (uint32_t a : m.tp_sizes()) {
      const Session s = draw_session(m, a, rng);
      TempDir dir;
      save_at(dir.str(), m, s, a);
      for (uint32_t b : m.tp_sizes()) {
        SCOPED_TRACE(::testing::Message()
                     << "heads " << m.heads << " layers " << m.layers() << " window " << m.window
                     << " in records of " << m.window_records() << " state " << m.state_layers
                     << "x" << m.state_bytes << " chunk " << m.chunk << " tokens "
                     << s.tokens.size() << ": saved at TP " << a << ", restored at TP " << b);
        restore_at(dir.str(), m, s, b, a, rng);
        ++pairs;
      }
    }
    ++models;
    with_state += m.state_layers > 0;
  }
  std::printf("hybrid: %llu models (%llu with recurrent state), %llu (save TP, restore TP) pairs\n",
              static_cast<unsigned long long>(models), static_cast<unsigned long long>(with_state),
              static_cast<unsigned long long>(pairs));
}

Hybrid small_model() {
  Hybrid m;
  m.heads = 2;
  m.kinds = {LayerKind::kFullAttention, LayerKind::kSlidingWindow, LayerKind::kFullAttention};
  m.head_dim = 8;
  m.chunk = 8;
  m.window = 5;
  m.state_layers = 2;
  m.state_bytes = 48;
  return m;
}

/// A paged cache whose layers have block tables of their own (one per kind, or one per layer, as
/// vLLM's hybrid KV cache manager keeps a table per group of layers), its sliding-window layers
/// holding only the blocks from the one with token n - W + 1 on (vLLM hands out its null block
/// before it); every block no table names holds garbage.
struct WindowedCache {
  WindowedCache(const Hybrid& m, uint64_t n, uint32_t bs, PagedLayout layout, bool table_per_layer,
                std::mt19937_64& rng)
      : need(static_cast<uint32_t>((n + bs - 1) / bs)),
        host(m.rank(0, 1), static_cast<uint32_t>(m.layers()) * need + 3, bs, layout) {
    const std::vector<int32_t> blocks =
        testing::shuffled_blocks(uint64_t{m.layers()} * need * bs, bs, host.view.num_blocks, rng());
    held_from = (n + 1 > m.window ? n + 1 - m.window : 0) / bs;
    tables.resize(m.layers());
    for (uint32_t l = 0; l < m.layers(); ++l) {
      const bool windowed = m.kinds[l] == LayerKind::kSlidingWindow;
      // One table per layer, or the first of a kind's layers' table shared by the others.
      const uint32_t owner = table_per_layer ? l : windowed ? 1 : 0;
      tables[l].assign(blocks.begin() + owner * need, blocks.begin() + (owner + 1) * need);
      if (windowed) std::fill(tables[l].begin(), tables[l].begin() + held_from, kSkipBlock);
    }
    host.view.block_table = tables[0];
    for (uint32_t l = 0; l < m.layers(); ++l) {
      // Layers on block_table name no table of their own.
      host.view.layer_block_tables.push_back(tables[l] == tables[0] ? std::span<const int32_t>()
                                                                    : std::span(tables[l]));
    }
  }
  /// Moves the rows of `tokens` tokens every layer holds between `contiguous` ([2, L, n, row])
  /// and the cache.
  void move(const Hybrid& m, std::byte* contiguous, uint64_t n, uint64_t tokens, bool to_paged) {
    testing::move_held(m.rank(0, 1), host, tables, contiguous, n, tokens, to_paged);
  }
  uint32_t need;
  testing::PagedHost host;
  std::vector<std::vector<int32_t>> tables;  ///< each layer's
  uint64_t held_from = 0;                    ///< the window layers' first held block
};

/// `cache`'s window layers as the vLLM connector saves a step's end while vLLM lets go of the
/// window: each in a tensor of its own holding only the blocks its table names, in table order
/// (fewer blocks than the cache's: PagedKv::layer_num_blocks), with a table into it; every other
/// layer as it is.
struct WindowCopies {
  WindowCopies(const Hybrid& m, const WindowedCache& cache, std::byte* contiguous, uint64_t n)
      : copies(m.rank(0, 1),
               std::max<uint32_t>(cache.need - static_cast<uint32_t>(cache.held_from), 1),
               cache.host.view.block_size, cache.host.view.layout),
        tables(cache.tables) {
    view = cache.host.view;
    view.layer_block_tables.clear();
    std::vector<std::vector<int32_t>> into(m.layers(),
                                           std::vector<int32_t>(cache.need, kSkipBlock));
    for (uint32_t l = 0; l < m.layers(); ++l) {
      // A window that holds no block (its tokens all left it) needs no copy.
      if (m.kinds[l] != LayerKind::kSlidingWindow || cache.held_from == cache.need) {
        view.layer_num_blocks.push_back(cache.host.view.num_blocks);
        continue;
      }
      for (uint64_t i = cache.held_from; i < cache.need; ++i) {
        into[l][i] = static_cast<int32_t>(i - cache.held_from);
      }
      tables[l] = into[l];
      view.layers[l] = copies.view.layers[l];
      view.layer_num_blocks.push_back(copies.view.num_blocks);
    }
    testing::move_held(m.rank(0, 1), copies, into, contiguous, n, n, /*to_paged=*/true);
    view.block_table = tables[0];
    for (const auto& t : tables) view.layer_block_tables.emplace_back(t);
  }
  testing::PagedHost copies;
  std::vector<std::vector<int32_t>> tables;
  PagedKv view;
};

TEST(HybridStore, WindowLayersWithBlocksOfTheirOwnKeepOnlyWhatTheyStillHoldAndNeverServeMore) {
  std::mt19937_64 rng(testing::test_seed());
  uint64_t cases = 0, hits_at_end = 0, shorter = 0, copied = 0;
  for (int round = 0; round < 40; ++round) {
    Hybrid m;
    m.heads = 1 + static_cast<uint32_t>(rng() % 4);
    m.head_dim = 8 * (1 + static_cast<uint32_t>(rng() % 3));
    const uint32_t layers = 2 + static_cast<uint32_t>(rng() % 4);
    for (uint32_t l = 0; l < layers; ++l)
      m.kinds.push_back(rng() % 2 == 0 ? LayerKind::kSlidingWindow : LayerKind::kFullAttention);
    m.kinds[0] = LayerKind::kFullAttention;
    m.kinds[1 + rng() % (layers - 1)] = LayerKind::kSlidingWindow;
    const uint32_t bs = 1 + static_cast<uint32_t>(rng() % 8);
    m.chunk = bs * (1 + static_cast<uint32_t>(rng() % 4));
    m.window = 1 + static_cast<uint32_t>(rng() % (3 * m.chunk));
    // The vLLM connector's choice (a record a block), or records a chunk long.
    m.window_chunk = rng() % 4 != 0 ? bs : 0;
    if (rng() % 2 == 0) {
      m.state_layers = 1 + static_cast<uint32_t>(rng() % 2);
      m.state_bytes = 64 * (1 + rng() % 8);
    }
    const KvGeometry g = m.rank(0, 1);
    const uint64_t n = 1 + rng() % (6 * m.chunk);
    const auto layout = static_cast<PagedLayout>(rng() % 4);
    const bool per_layer = rng() % 2 == 0;
    SCOPED_TRACE(::testing::Message()
                 << "layers " << layers << " window " << m.window << " in records of "
                 << m.window_records() << " chunk " << m.chunk << " block " << bs << " state "
                 << m.state_layers << " tokens " << n << " layout " << static_cast<int>(layout)
                 << (per_layer ? ", a table per layer" : ", a table per kind"));
    std::vector<Token> tokens(n);
    for (auto& t : tokens) t = static_cast<Token>(rng() % 50000);
    std::vector<std::byte> truth = random_bytes(g.bytes_for_tokens(n), rng);
    std::vector<std::byte> state = random_bytes(uint64_t{m.state_layers} * m.state_bytes, rng);
    WindowedCache source(m, n, bs, layout, per_layer, rng);
    for (auto& l : source.host.layers) {
      for (auto& b : l) b = static_cast<std::byte>(rng());
    }
    source.move(m, truth.data(), n, n, /*to_paged=*/true);

    // Half the rounds save the window layers from copies of the blocks they hold.
    const bool from_copies = rng() % 2 == 0;
    const WindowCopies copies(m, source, truth.data(), n);
    const PagedKv& from = from_copies ? copies.view : source.host.view;
    copied += from_copies;

    TempDir dir;
    std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
    ASSERT_TRUE(e);
    auto saved =
        m.state_layers > 0 ? e->save(tokens, from, state_view(state, m)) : e->save(tokens, from);
    ASSERT_TRUE(saved) << saved.error().message();
    // The end is stored where the records a restore there reads lie wholly in held blocks: always
    // when a record is a block.
    const bool end_held = m.window_start(n) >= source.held_from * bs;
    EXPECT_EQ(saved->tokens_stored, end_held ? n : 0);
    auto at_end = e->lookup(tokens);
    ASSERT_TRUE(at_end);
    EXPECT_EQ(*at_end == n, end_held);
    hits_at_end += *at_end == n;

    // Every prefix that ends at a chunk boundary, and the whole: whatever boundary a lookup
    // finds, its restore is the truth, byte for byte.
    for (uint64_t end = n; end > 0; end = (end - 1) / m.chunk * m.chunk) {
      const std::span<const Token> query(tokens.data(), end);
      auto b = e->lookup(query);
      ASSERT_TRUE(b);
      ASSERT_LE(*b, end);
      if (*b == 0) continue;
      WindowedCache dest(m, *b, bs, layout, per_layer, rng);
      for (auto& l : dest.host.layers) std::fill(l.begin(), l.end(), kUntouched);
      std::vector<std::byte> got_state(state.size(), kUntouched);
      auto restored = m.state_layers > 0
                          ? e->restore(query, dest.host.view, state_view(got_state, m))
                          : e->restore(query, dest.host.view);
      ASSERT_TRUE(restored) << restored.error().message();
      ASSERT_EQ(restored->tokens_restored, *b) << restored->problem;
      std::vector<std::byte> back(g.bytes_for_tokens(n), kUntouched);
      dest.move(m, back.data(), n, *b, /*to_paged=*/false);
      uint64_t wrong = 0;
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t l = 0; l < layers; ++l)
          for (uint64_t t = 0; t < *b; ++t) {
            if (dest.tables[l][t / bs] == kSkipBlock) continue;
            const uint64_t at = ((uint64_t{kv} * layers + l) * n + t) * g.row_bytes();
            wrong += std::memcmp(back.data() + at, truth.data() + at, g.row_bytes()) != 0;
          }
      EXPECT_EQ(wrong, 0u) << "rows of a restore at " << *b << " that are not the KV saved";
      if (m.state_layers > 0) {
        EXPECT_TRUE(got_state == state);
      }
      // Blocks no table names stay as they were.
      std::vector<bool> named(dest.host.view.num_blocks, false);
      for (const auto& table : dest.tables) {
        for (int32_t blk : table) {
          if (blk != kSkipBlock) named[blk] = true;
        }
      }
      // A block's bytes: one run, or a K run and a V run (kv_first).
      const uint32_t runs = layout == PagedLayout::kKvFirst ? 2 : 1;
      const uint64_t run_bytes = dest.host.layer_bytes / dest.host.view.num_blocks / runs;
      for (uint32_t l = 0; l < layers; ++l) {
        for (uint32_t blk = 0; blk < dest.host.view.num_blocks; ++blk) {
          for (uint32_t r = 0; r < runs && !named[blk]; ++r) {
            const std::byte* at = dest.host.layers[l].data() + r * dest.host.layer_bytes / 2 +
                                  uint64_t{blk} * run_bytes;
            EXPECT_TRUE(
                std::all_of(at, at + run_bytes, [](std::byte x) { return x == kUntouched; }))
                << "layer " << l << " block " << blk << ", named by no table, was written";
          }
        }
      }
      shorter += end < n;
    }
    ++cases;
  }
  std::printf(
      "windowed paged caches: %llu models (%llu saved from copies of their windows), %llu stored "
      "whole at their end, %llu shorter prefixes restored\n",
      static_cast<unsigned long long>(cases), static_cast<unsigned long long>(copied),
      static_cast<unsigned long long>(hits_at_end), static_cast<unsigned long long>(shorter));
  EXPECT_GT(copied, 0u);
}

TEST(HybridStore, ALookupHitsOnlyAtABoundaryWhoseStateAndWindowAreHeld) {
  std::mt19937_64 rng(testing::test_seed());
  const Hybrid m = small_model();
  TempDir dir;
  std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
  ASSERT_TRUE(e);
  std::vector<Token> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 100);
  std::vector<std::byte> kv = random_bytes(m.rank(0, 1).bytes_for_tokens(40), rng);
  const ChunkedKv source{{kv.data(), kv.size(), MemoryKind::kHost, 0}, 40};
  std::vector<std::byte> state24 = random_bytes(2 * 48, rng);
  const std::span<const Token> first24(tokens.data(), 24);
  // The first turn: 24 tokens (three whole chunks) with their state.
  ASSERT_TRUE(e->save(first24, source, state_view(state24, m)));
  EXPECT_EQ(*e->lookup(tokens), 24u);
  // The second turn's KV (to 34) without a state: no boundary past 24 has one.
  const std::span<const Token> first34(tokens.data(), 34);
  auto saved = e->save(first34, source);
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->tokens_stored, 0u) << "a session without its state at its end";
  EXPECT_EQ(*e->lookup(first34), 24u);
  std::vector<std::byte> got(kv.size(), kUntouched), state(2 * 48, kUntouched);
  const ChunkedKv dest{{got.data(), got.size(), MemoryKind::kHost, 0}, 40};
  auto restored = e->restore(first34, dest, state_view(state, m));
  ASSERT_TRUE(restored) << restored.error().message();
  EXPECT_EQ(restored->tokens_restored, 24u);
  EXPECT_TRUE(state == state24);
  // Bytes restored: two full layers of 24 tokens, the window layer's 8 (tokens 16-23), the state.
  EXPECT_EQ(e->stats().bytes_restored, m.rank(0, 1).row_bytes() * 2 * (2 * 24 + 8) + 2 * 48);
  // The KV of that boundary: layers 0 and 2 (full) for tokens [0, 24), the window layer from the
  // chunk holding token 24 - 5 on, nothing past 24.
  const uint64_t row = m.rank(0, 1).row_bytes();
  for (uint32_t kv_tensor = 0; kv_tensor < 2; ++kv_tensor) {
    for (uint32_t l = 0; l < 3; ++l) {
      for (uint64_t t = 0; t < 40; ++t) {
        const uint64_t at = ((kv_tensor * 3ull + l) * 40 + t) * row;
        const bool restored_here = t < 24 && (l != 1 || t >= 16);
        EXPECT_EQ(std::memcmp(got.data() + at, kv.data() + at, row) == 0, restored_here)
            << "layer " << l << " token " << t;
      }
    }
  }
  // A partial last chunk: a state at 20 tokens serves a prompt that goes on past them.
  TempDir other;
  std::unique_ptr<Engine> f = open_rank(other.str(), m, 0, 1);
  std::vector<std::byte> state20 = random_bytes(2 * 48, rng);
  ASSERT_TRUE(f->save(std::span<const Token>(tokens.data(), 20), source, state_view(state20, m)));
  EXPECT_EQ(*f->lookup(tokens), 20u);
  // Restoring without the state memory, or with the wrong sizes, is refused.
  auto no_state = f->restore(tokens, dest);
  ASSERT_FALSE(no_state);
  EXPECT_EQ(no_state.error().code(), ErrorCode::kInvalidArgument);
  std::vector<std::byte> short_state(2 * 40);
  StateMemory bad;
  for (int l = 0; l < 2; ++l)
    bad.layers.push_back({short_state.data() + l * 40, 40, MemoryKind::kHost, 0});
  auto wrong = f->restore(tokens, dest, bad);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code(), ErrorCode::kInvalidArgument);
  // Evicting the session, named by a list that runs past its partial last chunk, drops its KV,
  // window and state records: nothing is held.
  auto dropped = f->evict(tokens);
  ASSERT_TRUE(dropped);
  EXPECT_GT(*dropped, 0u);
  EXPECT_EQ(f->stats().records, 0u);
  EXPECT_EQ(*f->lookup(tokens), 0u);
}

/// Saves inside chunks, as a chunked prefill's steps end wherever their token budget does: each
/// saved end that kept its state is found by any later list of the same tokens, however far past
/// it that list or the session's KV goes, and the restore there delivers its KV, window and state.
TEST(HybridStore, ASaveThatEndedInsideAChunkIsFoundByEveryListThatGoesOnPastIt) {
  std::mt19937_64 rng(testing::test_seed());
  uint64_t models = 0, ends_kept = 0, ends_inside = 0, lists = 0, hits_inside = 0;
  for (int round = 0; round < 12; ++round) {
    Hybrid m = draw_model(rng);
    if (m.state_layers == 0) {  // a window-only model holds any boundary its window records cover
      m.state_layers = 1;
      m.state_bytes = 64;
    }
    const KvGeometry g = m.rank(0, 1);
    TempDir dir;
    std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
    ASSERT_TRUE(e);
    const uint64_t n = 2 * m.chunk + rng() % (5 * m.chunk);
    std::vector<Token> tokens(n);
    for (auto& t : tokens) t = static_cast<Token>(rng() % 50000);
    std::vector<std::byte> kv = random_bytes(g.bytes_for_tokens(n), rng);
    const ChunkedKv source{{kv.data(), kv.size(), MemoryKind::kHost, 0}, n};
    // Saves at drawn ends in increasing order (steps of a prefill), most of them with the state
    // there, then the whole session with its own; `kept[e]`: the state held at end e.
    std::vector<uint64_t> ends;
    for (uint64_t at = 1 + rng() % m.chunk; at < n; at += 1 + rng() % (2 * m.chunk))
      ends.push_back(at);
    ends.push_back(n);
    std::map<uint64_t, std::vector<std::byte>> kept;
    for (uint64_t at : ends) {
      const std::span<const Token> prefix(tokens.data(), at);
      std::vector<std::byte> state = random_bytes(uint64_t{m.state_layers} * m.state_bytes, rng);
      auto saved = at == n || rng() % 4 != 0 ? e->save(prefix, source, state_view(state, m))
                                             : e->save(prefix, source);
      ASSERT_TRUE(saved) << saved.error().message();
      if (saved->tokens_stored == at) kept[at] = state;
      ends_inside += at % m.chunk != 0;
    }
    ASSERT_TRUE(kept.contains(n));
    ends_kept += kept.size();
    // Lists of the session's first d tokens, then others, to a drawn length: the hit is the last
    // kept end at or before d (and the list's end).
    for (int q = 0; q < 6; ++q) {
      SCOPED_TRACE(::testing::Message()
                   << "heads " << m.heads << " layers " << m.layers() << " window " << m.window
                   << " in records of " << m.window_records() << " state " << m.state_layers << "x"
                   << m.state_bytes << " chunk " << m.chunk << " session " << n);
      const uint64_t d = 1 + rng() % n;
      const uint64_t len = d + rng() % (2 * m.chunk);
      std::vector<Token> list(tokens.begin(), tokens.begin() + d);
      while (list.size() < len) {
        const Token t = static_cast<Token>(rng() % 50000);
        if (list.size() < n && t == tokens[list.size()]) continue;  // diverges at d
        list.push_back(t);
      }
      uint64_t want = 0;
      for (const auto& [at, _] : kept) {
        if (at <= d) want = at;
      }
      SCOPED_TRACE(::testing::Message() << "list " << len << " equal to the session's first " << d
                                        << ", hit wanted " << want);
      auto held = e->lookup(list);
      ASSERT_TRUE(held) << held.error().message();
      EXPECT_EQ(*held, want);
      std::vector<std::byte> got(g.bytes_for_tokens(len), kUntouched);
      std::vector<std::byte> state(uint64_t{m.state_layers} * m.state_bytes, kUntouched);
      const ChunkedKv dest{{got.data(), got.size(), MemoryKind::kHost, 0}, len};
      auto restored = e->restore(list, dest, state_view(state, m));
      ASSERT_TRUE(restored) << restored.error().message();
      EXPECT_EQ(restored->tokens_restored, want) << restored->problem;
      ++lists;
      hits_inside += want % m.chunk != 0;
      if (want == 0) continue;
      expect_rows(m, g.row_bytes(), got, len, kv, n, want);
      EXPECT_TRUE(state == kept[want]) << "not the state of that end";
    }
    // Evicting the session drops every record of every save inside it.
    auto dropped = e->evict(tokens);
    ASSERT_TRUE(dropped) << dropped.error().message();
    EXPECT_EQ(e->stats().records, 0u) << "records of saves inside the session outlive its eviction";
    EXPECT_EQ(*e->lookup(tokens), 0u);
    ++models;
  }
  std::printf(
      "saves inside chunks: %llu models, %llu ends kept (%llu inside a chunk), %llu lists "
      "(%llu hits inside a chunk)\n",
      static_cast<unsigned long long>(models), static_cast<unsigned long long>(ends_kept),
      static_cast<unsigned long long>(ends_inside), static_cast<unsigned long long>(lists),
      static_cast<unsigned long long>(hits_inside));
}

TEST(HybridStore, SlidingWindowLayersKeepOnlyTheLastWindow) {
  std::mt19937_64 rng(testing::test_seed());
  Hybrid m = small_model();
  m.state_layers = 0;
  m.state_bytes = 0;
  m.window = 8;
  TempDir dir;
  std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
  ASSERT_TRUE(e);
  std::vector<Token> tokens(80);  // ten chunks
  std::iota(tokens.begin(), tokens.end(), 7);
  std::vector<std::byte> kv = random_bytes(m.rank(0, 1).bytes_for_tokens(80), rng);
  ASSERT_TRUE(e->save(tokens, {{kv.data(), kv.size(), MemoryKind::kHost, 0}, 80}));
  // Two head groups: ten full-attention records each; window records from chunk (80 - 8) / 8 = 9
  // on: one each.
  EXPECT_EQ(e->stats().records, 2u * 10 + 2u * 1);
  // With no recurrent state, a prefix of the session ending at an earlier chunk boundary lacks
  // its window: the hit is the session's end, and a longer prompt's too.
  EXPECT_EQ(*e->lookup(tokens), 80u);
  EXPECT_EQ(*e->lookup(std::span<const Token>(tokens.data(), 72)), 0u);
}

// What a benchmark holds a restore against (kvtier's raw read, fio on the file ranges) must read
// what the restore reads: the full-attention records, the last window's and the state.
TEST(HybridStore, TheReadCeilingAndTheFileRangesCoverEveryPartARestoreReads) {
  std::mt19937_64 rng(testing::test_seed());
  const Hybrid m = small_model();
  TempDir dir;
  std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
  ASSERT_TRUE(e);
  std::vector<Token> tokens(80);
  std::iota(tokens.begin(), tokens.end(), 11);
  std::vector<std::byte> kv = random_bytes(m.rank(0, 1).bytes_for_tokens(80), rng);
  std::vector<std::byte> state = random_bytes(2 * 48, rng);
  ASSERT_TRUE(
      e->save(tokens, {{kv.data(), kv.size(), MemoryKind::kHost, 0}, 80}, state_view(state, m)));
  std::vector<std::byte> got(kv.size(), kUntouched), out(state.size(), kUntouched);
  auto restored =
      e->restore(tokens, {{got.data(), got.size(), MemoryKind::kHost, 0}, 80}, state_view(out, m));
  ASSERT_TRUE(restored) << restored.error().message();
  ASSERT_EQ(restored->tokens_restored, 80u);
  auto extents = e->read_extents(tokens);
  ASSERT_TRUE(extents) << extents.error().message();
  uint64_t bytes = 0;
  bool window = false, rank_state = false;
  for (const FileExtent& x : *extents) {
    bytes += x.length;
    window = window || x.path.find("/w0of") != std::string::npos;
    rank_state = rank_state || x.path.find("/s0of1/") != std::string::npos;
  }
  EXPECT_EQ(bytes, restored->bytes_read);
  EXPECT_TRUE(window && rank_state);
  auto ceiling = e->measure_read_ceiling(tokens);
  ASSERT_TRUE(ceiling) << ceiling.error().message();
  EXPECT_EQ(ceiling->bytes, restored->bytes_read);
  // A prefix no part holds reads nothing.
  std::vector<Token> other(tokens.rbegin(), tokens.rend());
  EXPECT_TRUE(e->read_extents(other)->empty());
}

TEST(HybridStore, ACorruptStateOrWindowRecordIsAMissNeverWrongKv) {
  std::mt19937_64 rng(testing::test_seed());
  const Hybrid m = small_model();
  TempDir dir;
  std::vector<Token> tokens(24);
  std::iota(tokens.begin(), tokens.end(), 3);
  std::vector<std::byte> kv = random_bytes(m.rank(0, 1).bytes_for_tokens(24), rng);
  std::vector<std::byte> state = random_bytes(2 * 48, rng);
  {
    std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
    ASSERT_TRUE(
        e->save(tokens, {{kv.data(), kv.size(), MemoryKind::kHost, 0}, 24}, state_view(state, m)));
  }
  // Flip a byte of the state record's payload (the one record of the state store, after its 4 KiB
  // header).
  uint64_t flipped = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    const std::string p = entry.path().string();
    if (!entry.is_regular_file() || p.find("/s0of1/") == std::string::npos ||
        entry.path().extension() != ".kvt")
      continue;
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(4096 + 5);
    char c = 0;
    f.get(c);
    f.seekp(4096 + 5);
    f.put(static_cast<char>(c ^ 0x10));
    ++flipped;
  }
  ASSERT_EQ(flipped, 1u);
  std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
  std::vector<std::byte> got(kv.size(), kUntouched), out(2 * 48, kUntouched);
  auto restored =
      e->restore(tokens, {{got.data(), got.size(), MemoryKind::kHost, 0}, 24}, state_view(out, m));
  ASSERT_TRUE(restored) << restored.error().message();
  EXPECT_EQ(restored->tokens_restored, 0u);
  EXPECT_FALSE(restored->problem.empty());
  EXPECT_EQ(*e->lookup(tokens), 0u) << "the corrupt state was dropped";
}

TEST(HybridStore, LayerBlockTablesThatDoNotFitAreRefused) {
  Hybrid m = small_model();  // layers: full, window, full
  m.state_layers = 0;
  m.state_bytes = 0;
  TempDir dir;
  std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
  ASSERT_TRUE(e);
  std::vector<Token> tokens(16, 7);
  testing::PagedHost host(m.rank(0, 1), 8, 4, PagedLayout::kBlockFirst);
  const std::vector<int32_t> table = {0, 1, 2, 3}, other = {4, 5, 6, 7}, short_table = {4, 5};
  std::vector<int32_t> skipping = other;
  skipping[0] = kSkipBlock;
  auto refused = [&](std::vector<std::span<const int32_t>> tables, const char* why) {
    host.view.block_table = table;
    host.view.layer_block_tables = std::move(tables);
    auto saved = e->save(tokens, host.view);
    ASSERT_FALSE(saved) << why;
    EXPECT_EQ(saved.error().code(), ErrorCode::kInvalidArgument) << why;
  };
  refused({{}, other}, "a table for two of three layers");
  refused({{}, short_table, {}}, "a table shorter than block_table");
  refused({skipping, {}, {}}, "a full-attention layer's save skipping tokens");
  // Layers of other block counts: one count each, none 0, the blocks a table names within its
  // layer's, and the layers a part keeps together (here the full-attention ones) alike.
  testing::PagedHost small(m.rank(0, 1), 4, 4, PagedLayout::kBlockFirst);
  auto counted = [&](std::vector<uint32_t> counts, uint32_t small_layer, const char* why) {
    host.view.layer_num_blocks = std::move(counts);
    const MemoryView was = host.view.layers[small_layer];
    host.view.layers[small_layer] = small.view.layers[small_layer];
    refused({{}, other, {}}, why);
    host.view.layers[small_layer] = was;
    host.view.layer_num_blocks.clear();
  };
  counted({8, 4}, 1, "two counts for three layers");
  counted({8, 0, 8}, 1, "a layer of no blocks");
  counted({8, 4, 8}, 1, "a table naming blocks 4..7 of a layer of 4");
  counted({8, 8, 4}, 2, "full-attention layers of 8 and 4 blocks, kept together");
  // A window layer's table may skip on save; the records it no longer holds are not kept.
  host.view.layer_block_tables = {{}, skipping, {}};
  auto saved = e->save(tokens, host.view);
  ASSERT_TRUE(saved) << saved.error().message();
  EXPECT_EQ(saved->tokens_stored, 16u);  // window 5: the last window lies in blocks 2 and 3
}

TEST(HybridStore, HybridGeometriesThatCannotBeKeptAreRefused) {
  Hybrid m = small_model();
  TempDir dir;
  auto refused = [&](KvGeometry g, uint32_t format = 2) {
    Options o = options_for(dir.str(), g, 8);
    o.store_format = format;
    auto e = Engine::open(o);
    EXPECT_FALSE(e);
    if (!e) {
      EXPECT_EQ(e.error().code(), ErrorCode::kInvalidArgument) << e.error().message();
    }
  };
  KvGeometry g = m.rank(0, 1);
  g.layer_kinds.pop_back();
  refused(g);  // a kind per layer or none
  g = m.rank(0, 1);
  g.layer_kinds.assign(3, LayerKind::kSlidingWindow);
  refused(g);  // no full-attention layer
  g = m.rank(0, 1);
  g.window_tokens = 0;
  refused(g);  // window layers without a window
  g = m.rank(0, 1);
  g.state_bytes = 12;
  refused(g);  // not whole words
  g = m.rank(0, 1);
  g.state_bytes = 0;
  refused(g);  // layers without a size
  g.state_bytes = 512ull << 20;
  refused(g);                // over 256 MiB a layer
  refused(m.rank(0, 1), 1);  // format 1 keeps no hybrid model
  g = m.rank(0, 1);
  g.window_chunk_tokens = 3;
  refused(g);  // window records that do not divide a chunk (8)
  g.window_chunk_tokens = 16;
  refused(g);  // nor longer than one
  g.layer_kinds.clear();
  g.window_tokens = 0;
  g.window_chunk_tokens = 4;
  refused(g);  // window records without window layers
  // A state given for a model without recurrent layers is refused, not ignored.
  m.state_layers = 0;
  m.state_bytes = 0;
  std::unique_ptr<Engine> e = open_rank(dir.str(), m, 0, 1);
  ASSERT_TRUE(e);
  std::vector<Token> tokens(8, 1);
  std::vector<std::byte> kv(m.rank(0, 1).bytes_for_tokens(8));
  std::vector<std::byte> state(8);
  StateMemory sv{{{state.data(), 8, MemoryKind::kHost, 0}}};
  auto saved = e->save(tokens, {{kv.data(), kv.size(), MemoryKind::kHost, 0}, 8}, sv);
  ASSERT_FALSE(saved);
  EXPECT_EQ(saved.error().code(), ErrorCode::kInvalidArgument);
}

/// Prefix-determined KV and state: every save of any session that shares a prefix supplies the
/// same bytes for it, so any restore can be checked against the truth of its own list.
struct Truth {
  const Hybrid& m;
  std::vector<Token> tokens;
  std::vector<uint64_t> h;  ///< h[t]: hash of tokens[0..t]
  Truth(const Hybrid& model, std::vector<Token> t) : m(model), tokens(std::move(t)) {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (Token tok : tokens) {
      x = (x ^ static_cast<uint64_t>(tok)) * 0xBF58476D1CE4E5B9ull;
      x ^= x >> 31;
      h.push_back(x);
    }
  }
  static void fill(std::byte* out, uint64_t n, uint64_t seed) {
    std::mt19937_64 r(seed);
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(r());
  }
  [[nodiscard]] std::vector<std::byte> kv() const {
    const uint64_t n = tokens.size(), row = m.heads * m.head_bytes();
    std::vector<std::byte> out(2 * m.layers() * n * row);
    for (uint32_t k = 0; k < 2; ++k)
      for (uint32_t l = 0; l < m.layers(); ++l)
        for (uint64_t t = 0; t < n; ++t)
          fill(out.data() + ((uint64_t{k} * m.layers() + l) * n + t) * row, row,
               h[t] ^ (uint64_t{k} * 7919 + l + 1) * 0x632BE59BD9B4E019ull);
    return out;
  }
  [[nodiscard]] std::vector<std::byte> state(uint64_t end) const {
    std::vector<std::byte> out(uint64_t{m.state_layers} * m.state_bytes);
    fill(out.data(), out.size(), h[end - 1] ^ 0x5555AAAA5555AAAAull);
    return out;
  }
};

std::vector<Token> random_tokens(uint64_t n, std::mt19937_64& rng) {
  std::vector<Token> t(n);
  for (auto& x : t) x = static_cast<Token>(rng() % 50000);
  return t;
}

/// Replicating ranks (one KV head, TP 2): rank 1 follows rank 0's full-attention store but keeps
/// its own states, at ends inside chunks too. Whichever rank evicts first (the writer's eviction
/// takes the KV that named those ends), each rank's eviction drops every state of its own.
TEST(HybridStore, EachReplicatingRankDropsItsOwnStatesWhicheverRankEvictsFirst) {
  Hybrid m;
  m.heads = 1;
  m.kinds = {LayerKind::kFullAttention};
  m.head_dim = 8;
  m.chunk = 8;
  m.state_layers = 1;
  m.state_bytes = 64;
  std::mt19937_64 rng(testing::test_seed());
  for (const bool writer_first : {false, true}) {
    TempDir dir;
    std::unique_ptr<Engine> r0 = open_rank(dir.str(), m, 0, 2);
    std::unique_ptr<Engine> r1 = open_rank(dir.str(), m, 1, 2);
    ASSERT_TRUE(r0 && r1);
    const uint64_t n = 40;
    const std::vector<Token> tokens = random_tokens(n, rng);
    std::vector<std::byte> kv0 =
        rank_kv(m, random_bytes(m.rank(0, 1).bytes_for_tokens(n), rng), n, 0, 2);
    const ChunkedKv source{{kv0.data(), kv0.size(), MemoryKind::kHost, 0}, n};
    for (uint64_t at : {uint64_t{12}, uint64_t{21}, uint64_t{30}, n}) {
      std::vector<std::byte> s = random_bytes(32, rng);
      StateMemory sv{{{s.data(), 32, MemoryKind::kHost, 0}}};
      const std::span<const Token> prefix(tokens.data(), at);
      ASSERT_TRUE(r0->save(prefix, source, sv));
      auto saved = r1->save(prefix, source, sv);
      ASSERT_TRUE(saved);
      EXPECT_EQ(saved->tokens_stored, at);
    }
    std::vector<Token> list(tokens.begin(), tokens.begin() + 25);
    EXPECT_EQ(*r1->lookup(list), 21u);
    Engine* first = writer_first ? r0.get() : r1.get();
    Engine* second = writer_first ? r1.get() : r0.get();
    ASSERT_TRUE(first->evict(tokens));
    static_cast<void>(r1->lookup(tokens));  // the follower refreshes its snapshot here
    ASSERT_TRUE(second->evict(tokens));
    EXPECT_EQ(*r1->lookup(tokens), 0u);  // and here: what follows counts its own state store
    EXPECT_EQ(r0->stats().records, 0u);
    EXPECT_EQ(r1->stats().records, 0u)
        << "rank 1's states at ends inside chunks outlive the eviction (writer evicts "
        << (writer_first ? "first)" : "second)");
    // The KV saved again without any state: rank 1 still hits at 21 with the state it evicted.
    const std::span<const Token> p21(tokens.data(), 21);
    ASSERT_TRUE(r0->save(p21, source));
    ASSERT_TRUE(r1->save(p21, source));
    EXPECT_EQ(*r0->lookup(list), 0u);
    EXPECT_EQ(*r1->lookup(list), 0u) << "rank 1 serves a state from before its eviction";
  }
}

/// Sessions forking from one another at drawn tokens, saved at drawn ends (most with their
/// state), evicted and saved again, looked up and restored with drawn lists: every hit restores,
/// every restored byte and state is its list's truth, and (without capacity pressure) every end
/// saved with its state since the last eviction that could touch it is found. Under pressure:
/// small stores that evict whole segments, and a DRAM tier.
void drawn_sessions(bool pressure) {
  std::mt19937_64 rng(testing::test_seed());
  uint64_t lookups = 0, hits = 0, inside = 0, seg_evicted = 0;
  for (int round = 0; round < 25; ++round) {
    Hybrid m = draw_model(rng);
    if (m.state_layers == 0) {
      m.state_layers = 1;
      m.state_bytes = 64;
    }
    const KvGeometry g = m.rank(0, 1);
    TempDir dir;
    Options o = options_for(dir.str(), g, m.max_tp);
    if (pressure) {
      // Small stores (a few segments each, evicted whole by capacity) and a DRAM tier.
      o.segment_bytes = 256 << 10;
      const uint64_t stores = std::min(m.heads, m.max_tp) * (m.window ? 2 : 1) + 1;
      o.capacity_bytes = (256ull << 10) * stores * 3;
      o.dram_bytes = 8ull << 20;
    }
    auto opened = Engine::open(o);
    ASSERT_TRUE(opened) << opened.error().message();
    std::unique_ptr<Engine> e = std::move(*opened);
    std::vector<std::vector<Token>> sessions;
    sessions.push_back(random_tokens(2 * m.chunk + rng() % (5 * m.chunk), rng));
    // Saved ends with a state: the prefixes.
    std::vector<std::vector<Token>> intact;
    for (int op = 0; op < (pressure ? 200 : 60); ++op) {
      SCOPED_TRACE(::testing::Message()
                   << "round " << round << " op " << op << " heads " << m.heads << " layers "
                   << m.layers() << " window " << m.window << " in records of "
                   << m.window_records() << " state " << m.state_layers << "x" << m.state_bytes
                   << " chunk " << m.chunk);
      const int what = static_cast<int>(rng() % 10);
      if (what < 2) {  // fork a session
        const auto& base = sessions[rng() % sessions.size()];
        std::vector<Token> s(base.begin(), base.begin() + static_cast<long>(rng() % base.size()));
        const uint64_t more = 1 + rng() % (4 * m.chunk);
        for (uint64_t i = 0; i < more; ++i) s.push_back(static_cast<Token>(rng() % 50000));
        sessions.push_back(std::move(s));
      } else if (what < 6) {  // save a prefix, with its state or not, once or twice
        const auto& s = sessions[rng() % sessions.size()];
        const uint64_t at = 1 + rng() % s.size();
        std::vector<Token> p(s.begin(), s.begin() + static_cast<long>(at));
        const Truth t(m, p);
        std::vector<std::byte> kv = t.kv();
        const ChunkedKv source{{kv.data(), kv.size(), MemoryKind::kHost, 0}, at};
        std::vector<std::byte> st = t.state(at);
        const bool with = rng() % 4 != 0;
        auto saved = with ? e->save(p, source, state_view(st, m)) : e->save(p, source);
        if (pressure && !saved) continue;  // a save larger than these small stores
        ASSERT_TRUE(saved) << saved.error().message();
        if (with) {
          EXPECT_EQ(saved->tokens_stored, at);
          intact.push_back(p);
        }
      } else if (what < 7) {  // evict a list
        const auto& s = sessions[rng() % sessions.size()];
        std::vector<Token> l(s.begin(), s.begin() + static_cast<long>(1 + rng() % s.size()));
        ASSERT_TRUE(e->evict(l));
        EXPECT_EQ(*e->lookup(l), 0u) << "an evicted list still hits";
        // Conservatively: every end sharing its first token with the list may have lost a record.
        std::erase_if(intact, [&](const std::vector<Token>& p) { return p[0] == l[0]; });
      } else {  // look up and restore a list
        const auto& s = sessions[rng() % sessions.size()];
        std::vector<Token> l(s.begin(), s.begin() + static_cast<long>(1 + rng() % s.size()));
        if (rng() % 2) {
          const uint64_t more = rng() % (2 * m.chunk);
          for (uint64_t i = 0; i < more; ++i) l.push_back(static_cast<Token>(rng() % 50000));
        }
        const uint64_t len = l.size();
        uint64_t want_at_least = 0;
        for (const auto& p : intact) {
          if (p.size() <= len && std::equal(p.begin(), p.end(), l.begin()))
            want_at_least = std::max<uint64_t>(want_at_least, p.size());
        }
        auto held = e->lookup(l);
        ASSERT_TRUE(held);
        if (!pressure) {
          EXPECT_GE(*held, want_at_least) << "an end saved with its state is not found";
        }
        const Truth t(m, l);
        std::vector<std::byte> got(g.bytes_for_tokens(len), kUntouched);
        std::vector<std::byte> st(uint64_t{m.state_layers} * m.state_bytes, kUntouched);
        const ChunkedKv dest{{got.data(), got.size(), MemoryKind::kHost, 0}, len};
        auto restored = e->restore(l, dest, state_view(st, m));
        ASSERT_TRUE(restored) << restored.error().message();
        ASSERT_EQ(restored->tokens_restored, *held)
            << "lookup and restore disagree: " << restored->problem;
        ++lookups;
        if (*held == 0) continue;
        ++hits;
        inside += *held % m.chunk != 0;
        expect_rows(m, g.row_bytes(), got, len, t.kv(), len, *held);
        EXPECT_TRUE(st == t.state(*held)) << "wrong state at hit " << *held;
      }
    }
    seg_evicted += e->stats().evicted_segments;
  }
  std::printf(
      "forked sessions%s: %llu lookups, %llu hits (%llu inside a chunk), %llu segments "
      "evicted by capacity\n",
      pressure ? " under capacity pressure" : "", (unsigned long long)lookups,
      (unsigned long long)hits, (unsigned long long)inside, (unsigned long long)seg_evicted);
}

TEST(HybridStore, ForkedSessionsSavedEvictedAndLookedUpRestoreTheirOwnKvAndState) {
  drawn_sessions(false);
}
TEST(HybridStore, ForkedSessionsUnderCapacityPressureWithADramTierNeverRestoreWrongKv) {
  drawn_sessions(true);
}

}  // namespace
}  // namespace kvtier
