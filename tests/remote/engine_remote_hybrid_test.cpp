// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Hybrid models through a real Redis Cluster: what node A saved (full-attention KV, the last
// window's sliding-window KV, each rank's recurrent state) is found and restored by node B from
// the cluster, every byte compared; a boundary the cluster lacks part of, or holds damaged, is
// never served.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine_remote_util.hpp"
#include "hybrid_model.hpp"
#include "store/record_format.hpp"

namespace kvtier {
namespace {

using testing::Hybrid;
using testing::HybridSession;
using testing::RedisCluster;
using testing::TempDir;

Options node(const TempDir& dir, const Hybrid& m, uint32_t r, uint32_t tp,
             const std::string& seeds) {
  Options o = testing::tp_free_options(dir.str(), m.rank(r, tp), m.max_tp, 4ull << 30);
  o.segment_bytes = 16 << 20;  // a dozen stores a rank, each preallocating a segment
  o.remote.seeds = seeds;
  return o;
}

std::unique_ptr<Engine> open_node(const TempDir& dir, const Hybrid& m, uint32_t r, uint32_t tp,
                                  const std::string& seeds) {
  auto e = Engine::open(node(dir, m, r, tp, seeds));
  EXPECT_TRUE(e) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

/// Every rank of TP `tp` saves its share of `s` into the store under `dir`, and its records
/// reach the cluster (write-behind drained).
void save_node(const TempDir& dir, const Hybrid& m, const HybridSession& s, uint32_t tp,
               const std::string& seeds) {
  for (uint32_t r = 0; r < tp; ++r) {
    std::unique_ptr<Engine> e = open_node(dir, m, r, tp, seeds);
    ASSERT_TRUE(e);
    testing::save_rank(*e, m, s, r, tp);
    e->wait_remote();
    EXPECT_EQ(e->stats().remote_write_errors, 0u) << e->stats().remote;
  }
}

/// Every value the cluster's masters hold: its name, and the port of the master holding it.
std::map<std::string, uint16_t> cluster_names(const RedisCluster& cluster) {
  std::map<std::string, uint16_t> names;
  auto nodes = cluster.nodes();
  EXPECT_TRUE(nodes) << nodes.error().message();
  if (!nodes) return names;
  for (const auto& n : *nodes) {
    if (!n.master || n.failed) continue;
    const testing::ToolRun run = cluster.cli(n.port, {"keys", "kvtier:*"});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    std::istringstream lines(run.output);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) names[line] = n.port;
    }
  }
  return names;
}

/// One lookup and one restore of `t` (TP 1) into contiguous host memory and a state, both filled
/// with kUntouched first: what each said and what the restore wrote.
struct Restored {
  uint64_t held = 0;
  RestoreResult result;
  std::vector<std::byte> kv, state;
};

Restored lookup_and_restore(Engine& e, const Hybrid& m, const HybridSession& t) {
  Restored out;
  auto held = e.lookup(t.tokens);
  EXPECT_TRUE(held) << held.error().message();
  out.held = held ? *held : 0;
  const uint64_t n = t.tokens.size();
  out.kv.assign(m.rank(0, 1).bytes_for_tokens(n), testing::kUntouched);
  out.state.assign(uint64_t{m.state_layers} * m.state_bytes, testing::kUntouched);
  const ChunkedKv dest{{out.kv.data(), out.kv.size(), MemoryKind::kHost, 0}, n};
  auto restored = e.restore(t.tokens, dest, testing::state_view(out.state, m));
  EXPECT_TRUE(restored) << restored.error().message();
  if (restored) out.result = *restored;
  return out;
}

/// A lookup of `t` finds `hit` tokens, and the restore refuses them whole (a part's record failed
/// its check): nothing restored, the problem said.
void expect_refused(Engine& e, const Hybrid& m, const HybridSession& t, uint64_t hit) {
  const Restored r = lookup_and_restore(e, m, t);
  EXPECT_EQ(r.held, hit);
  EXPECT_EQ(r.result.tokens_restored, 0u);
  EXPECT_FALSE(r.result.problem.empty());
}

/// Changes four bytes of the value `name` (on master `port`) past its header block: its size
/// stays right, so a lookup still counts it and only a restore's check finds it damaged.
void damage_payload(const RedisCluster& cluster, uint16_t port, const std::string& name) {
  const testing::ToolRun flip =
      cluster.cli(port, {"setrange", name, std::to_string(kBlock + 1), "kvtx"});
  ASSERT_EQ(flip.exit_code, 0) << flip.output;
}

/// `s`'s first `k` tokens with their KV (the same rows) and a state of its own drawn for each
/// rank of TP `tp`: a save that ended at `k`.
HybridSession prefix_of(const Hybrid& m, const HybridSession& s, uint64_t k, uint32_t tp,
                        std::mt19937_64& rng) {
  HybridSession p;
  const uint64_t n = s.tokens.size(), row = m.heads * m.head_bytes();
  p.tokens.assign(s.tokens.begin(), s.tokens.begin() + static_cast<ptrdiff_t>(k));
  for (uint64_t line = 0; line < 2ull * m.layers(); ++line) {
    const auto* from = s.kv.data() + line * n * row;
    p.kv.insert(p.kv.end(), from, from + k * row);
  }
  for (uint32_t r = 0; r < tp; ++r)
    p.states.push_back(testing::random_bytes(uint64_t{m.state_layers} * m.state_bytes / tp, rng));
  return p;
}

// Drawn hybrid models (window layers, recurrent state, or both) and sessions: node A saves at
// one TP size; node B, whose drives hold nothing, finds and restores the whole session from the
// cluster at that TP size and at another (a state is its rank's: another TP size finds none).
TEST(EngineRemoteHybrid, NodeBRestoresWhatNodeASavedKvWindowAndStateFromTheCluster) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const std::string seeds = (*cluster)->seeds();
  std::mt19937_64 rng(testing::test_seed());
  uint64_t restores = 0, with_state = 0, with_window = 0;
  for (int round = 0; round < 6; ++round) {
    const Hybrid m = testing::draw_model(rng);
    const std::vector<uint32_t> sizes = m.tp_sizes();
    const uint32_t a = sizes[rng() % sizes.size()];
    const uint32_t b = sizes[rng() % sizes.size()];
    const HybridSession s = testing::draw_session(m, a, rng);
    const uint64_t n = s.tokens.size();
    SCOPED_TRACE(::testing::Message()
                 << "heads " << m.heads << " layers " << m.layers() << " window " << m.window
                 << " in records of " << m.window_records() << " state " << m.state_layers << "x"
                 << m.state_bytes << " chunk " << m.chunk << " tokens " << n << ": saved at TP "
                 << a << ", restored at TP " << a << " and " << b);
    TempDir dir_a;
    save_node(dir_a, m, s, a, seeds);
    for (uint32_t tp : {a, b}) {
      const uint64_t want = m.state_layers > 0 && tp != a ? 0 : n;
      TempDir dir_b;
      for (uint32_t r = 0; r < tp; ++r) {
        SCOPED_TRACE(::testing::Message() << "node B, rank " << r << " of TP " << tp);
        std::unique_ptr<Engine> e = open_node(dir_b, m, r, tp, seeds);
        ASSERT_TRUE(e);
        testing::restore_rank(*e, m, s, r, tp, want, rng);
        // B's first rank finds its drives empty; later ones may be served what it promoted
        // into the stores they share (ranks replicating a head follow one writer's).
        if (want > 0 && r == 0) {
          EXPECT_GT(e->stats().remote_hits, 0u);
        }
        ++restores;
      }
    }
    with_state += m.state_layers > 0;
    with_window += m.window > 0;
  }
  std::printf(
      "hybrid through the cluster: 6 models (%llu with state, %llu with window layers), "
      "%llu rank restores\n",
      static_cast<unsigned long long>(with_state), static_cast<unsigned long long>(with_window),
      static_cast<unsigned long long>(restores));
}

/// `p`'s tokens and KV followed by `extra` drawn tokens and rows: a longer list that goes on
/// past where `p`'s save ended (and leaves any other session holding p's tokens there).
HybridSession continuation(const Hybrid& m, const HybridSession& p, uint64_t extra,
                           std::mt19937_64& rng) {
  HybridSession t;
  const uint64_t k = p.tokens.size(), row = m.heads * m.head_bytes();
  t.tokens = p.tokens;
  for (uint64_t i = 0; i < extra; ++i)
    t.tokens.push_back(static_cast<Token>(50000 + rng() % 50000));
  for (uint64_t line = 0; line < 2ull * m.layers(); ++line) {
    const auto* from = p.kv.data() + line * k * row;
    t.kv.insert(t.kv.end(), from, from + k * row);
    const std::vector<std::byte> more = testing::random_bytes(extra * row, rng);
    t.kv.insert(t.kv.end(), more.begin(), more.end());
  }
  t.states = p.states;
  return t;
}

// Node A saved n tokens; node B saved their first k itself (its own state there). B's lookup
// takes the cluster's longer boundary over its own. A node holding nothing, given a list that
// goes on past k another way (B's session continued), finds B's boundary at k in the cluster,
// inside a chunk or on a boundary, and restores exactly that; with B's state damaged in the
// cluster the restore is refused whole, and with it gone no boundary is found.
TEST(EngineRemoteHybrid, TheLongestBoundaryAnyNodeSavedIsServedAndOneWithoutItsStateIsNot) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const std::string seeds = (*cluster)->seeds();
  std::mt19937_64 rng(testing::test_seed());
  Hybrid m;
  m.heads = 2;
  m.kinds = {LayerKind::kFullAttention, LayerKind::kSlidingWindow, LayerKind::kFullAttention};
  m.head_dim = 8;
  m.chunk = 8;
  m.window = 1 + static_cast<uint32_t>(rng() % 12);
  // A state record's 80 bytes are no whole number of a window record's tokens (32 bytes each a
  // head group): B's state is told from B's window records by its size.
  m.state_layers = 2;
  m.state_bytes = 40;
  for (int round = 0; round < 3; ++round) {
    HybridSession s = testing::draw_session(m, 1, rng);
    while (s.tokens.size() < 4 * m.chunk) s = testing::draw_session(m, 1, rng);
    const uint64_t n = s.tokens.size();
    // Inside a chunk or on its end, at least one chunk in, short of n.
    const uint64_t k = m.chunk + rng() % (n - m.chunk - 1);
    const HybridSession p = prefix_of(m, s, k, 1, rng);
    const HybridSession t = continuation(m, p, 2 * m.chunk, rng);
    SCOPED_TRACE(::testing::Message()
                 << "window " << m.window << ", A saved " << n << " tokens, B their first " << k);
    TempDir dir_a, dir_b;
    save_node(dir_a, m, s, 1, seeds);
    const std::map<std::string, uint16_t> before_b = cluster_names(**cluster);
    save_node(dir_b, m, p, 1, seeds);
    {
      SCOPED_TRACE("node B: its own boundary at k, the cluster's at n");
      std::unique_ptr<Engine> e = open_node(dir_b, m, 0, 1, seeds);
      ASSERT_TRUE(e);
      testing::restore_rank(*e, m, s, 0, 1, n, rng);
    }
    {
      SCOPED_TRACE("node C: B's session continued");
      TempDir dir_c;
      std::unique_ptr<Engine> e = open_node(dir_c, m, 0, 1, seeds);
      ASSERT_TRUE(e);
      testing::restore_rank(*e, m, t, 0, 1, k, rng, &p.states[0]);
      EXPECT_GT(e->stats().remote_hits, 0u);
    }
    // B's state at k: what B's save added to the cluster that is no full-attention record of p
    // (its partial last chunk among them) nor a window record.
    std::unique_ptr<Engine> probe = open_node(dir_b, m, 0, 1, seeds);
    ASSERT_TRUE(probe);
    auto chain = probe->remote_keys(p.tokens);
    ASSERT_OK(chain);
    probe.reset();
    const uint64_t state_value = kBlock + uint64_t{m.state_layers} * m.state_bytes;
    std::string b_state;
    uint16_t port = 0;
    uint64_t found = 0;
    for (const auto& [name, at] : cluster_names(**cluster)) {
      if (before_b.contains(name) ||
          std::any_of(chain->begin(), chain->end(),
                      [&](const RemoteRecordKey& c) { return c.key == name; }))
        continue;
      const testing::ToolRun len = (*cluster)->cli(at, {"strlen", name});
      ASSERT_EQ(len.exit_code, 0) << len.output;
      if (std::stoull(len.output) != state_value) continue;
      b_state = name;
      port = at;
      ++found;
    }
    ASSERT_EQ(found, 1u);
    // The lookup finds the boundary, and the restore refuses it whole.
    damage_payload(**cluster, port, b_state);
    {
      SCOPED_TRACE("node D: B's state damaged in the cluster");
      TempDir dir_d;
      std::unique_ptr<Engine> e = open_node(dir_d, m, 0, 1, seeds);
      ASSERT_TRUE(e);
      expect_refused(*e, m, t, k);
      EXPECT_GT(e->stats().remote_rejected, 0u);
    }
    const testing::ToolRun del = (*cluster)->cli(port, {"del", b_state});
    ASSERT_EQ(del.exit_code, 0) << del.output;
    {
      SCOPED_TRACE("node E: B's state gone from the cluster");
      TempDir dir_e;
      std::unique_ptr<Engine> e = open_node(dir_e, m, 0, 1, seeds);
      ASSERT_TRUE(e);
      testing::restore_rank(*e, m, t, 0, 1, 0, rng);
    }
    ASSERT_OK(testing::flush_cluster(**cluster));
  }
}

// Saved while the node had no cluster tier, then published by sync_remote, with the session's
// list (its full-attention chain, and the window and state records a restore of its boundary
// reads) or without one (every record): another node restores it whole from the cluster.
TEST(EngineRemoteHybrid, SyncPublishesTheWindowAndStateRecordsTooWithOrWithoutAList) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const std::string seeds = (*cluster)->seeds();
  std::mt19937_64 rng(testing::test_seed());
  for (const bool with_list : {true, false}) {
    Hybrid m;
    while (m.window == 0 || m.state_layers == 0) m = testing::draw_model(rng);
    const std::vector<uint32_t> sizes = m.tp_sizes();
    const uint32_t tp = sizes[rng() % sizes.size()];
    const HybridSession s = testing::draw_session(m, tp, rng);
    SCOPED_TRACE(::testing::Message() << (with_list ? "sync of the list" : "sync of everything")
                                      << ", TP " << tp << ", " << s.tokens.size() << " tokens");
    TempDir dir_a, dir_b;
    save_node(dir_a, m, s, tp, "");
    ASSERT_EQ(cluster_names(**cluster).size(), 0u);
    for (uint32_t r = 0; r < tp; ++r) {
      std::unique_ptr<Engine> e = open_node(dir_a, m, r, tp, seeds);
      ASSERT_TRUE(e);
      auto synced = with_list ? e->sync_remote(s.tokens) : e->sync_remote();
      ASSERT_OK(synced);
      EXPECT_EQ(synced->failed, 0u) << synced->problem;
    }
    for (uint32_t r = 0; r < tp; ++r) {
      SCOPED_TRACE(::testing::Message() << "node B, rank " << r);
      std::unique_ptr<Engine> e = open_node(dir_b, m, r, tp, seeds);
      ASSERT_TRUE(e);
      testing::restore_rank(*e, m, s, r, tp, s.tokens.size(), rng);
    }
    ASSERT_OK(testing::flush_cluster(**cluster));
  }
}

/// A session of `n` drawn tokens, KV and (TP 1) state.
HybridSession session_of(const Hybrid& m, uint64_t n, std::mt19937_64& rng) {
  HybridSession s;
  for (uint64_t i = 0; i < n; ++i) s.tokens.push_back(static_cast<Token>(rng() % 50000));
  s.kv = testing::random_bytes(2 * m.layers() * n * m.heads * m.head_bytes(), rng);
  s.states.push_back(testing::random_bytes(uint64_t{m.state_layers} * m.state_bytes, rng));
  return s;
}

/// One head, a full-attention layer and a sliding-window layer of `window` tokens kept in records
/// of `window_chunk`, chunks of `chunk`.
Hybrid one_window_model(uint32_t chunk, uint32_t window, uint32_t window_chunk) {
  Hybrid m;
  m.heads = 1;
  m.kinds = {LayerKind::kFullAttention, LayerKind::kSlidingWindow};
  m.head_dim = 8;
  m.chunk = chunk;
  m.window = window;
  m.window_chunk = window_chunk;
  return m;
}

// A node restores a part's records from its own tiers only as a run from the first, the rest
// from the cluster. Node A saved the first 12 tokens through the cluster (window records 0-5
// there); node B saved all 24 with no cluster tier (window records 6-11 only on its drives). A
// list going on past 20 another way: 20 and 16 need window records from both places in an
// order a restore cannot serve, so the lookup says 12, and the restore delivers it.
TEST(EngineRemoteHybrid, WindowRecordsHeldHereAfterOnesOnlyTheClusterHoldsAreNoHit) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const std::string seeds = (*cluster)->seeds();
  std::mt19937_64 rng(testing::test_seed());
  const Hybrid m = one_window_model(4, 12, 2);
  for (int round = 0; round < 3; ++round) {
    const HybridSession s = session_of(m, 24, rng);
    const HybridSession t = continuation(m, prefix_of(m, s, 20, 1, rng), 6, rng);
    TempDir dir_a, dir_b;
    save_node(dir_a, m, prefix_of(m, s, 12, 1, rng), 1, seeds);
    save_node(dir_b, m, s, 1, "");
    std::unique_ptr<Engine> e = open_node(dir_b, m, 0, 1, seeds);
    ASSERT_TRUE(e);
    testing::restore_rank(*e, m, t, 0, 1, 12, rng);
    ASSERT_OK(testing::flush_cluster(**cluster));
  }
}

// Node A's state at 40 is damaged in the cluster (its size intact); node B saved the first 16
// tokens itself. The lookup finds 40; the restore there fails its check, and B's own records
// serve 16: every byte of them right, B's state.
TEST(EngineRemoteHybrid, ARestoreTheClusterFailsFallsBackToTheNodesOwnBoundary) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const std::string seeds = (*cluster)->seeds();
  std::mt19937_64 rng(testing::test_seed());
  Hybrid m;
  m.heads = 2;
  m.kinds = {LayerKind::kFullAttention};
  m.head_dim = 8;
  m.chunk = 8;
  m.state_layers = 2;
  m.state_bytes = 40;  // 80 bytes: no whole number of a group's 32-byte token rows
  const HybridSession s = session_of(m, 40, rng);
  const HybridSession p = prefix_of(m, s, 16, 1, rng);
  TempDir dir_a, dir_b;
  save_node(dir_a, m, s, 1, seeds);
  uint64_t damaged = 0;
  for (const auto& [name, port] : cluster_names(**cluster)) {
    const testing::ToolRun len = (*cluster)->cli(port, {"strlen", name});
    ASSERT_EQ(len.exit_code, 0) << len.output;
    if (std::stoull(len.output) != kBlock + 80) continue;
    damage_payload(**cluster, port, name);
    ++damaged;
  }
  ASSERT_EQ(damaged, 1u);
  save_node(dir_b, m, p, 1, seeds);
  std::unique_ptr<Engine> e = open_node(dir_b, m, 0, 1, seeds);
  ASSERT_TRUE(e);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Restored r = lookup_and_restore(*e, m, s);
    EXPECT_EQ(r.held, 40u);  // the damaged value stays in the cluster, its size right
    EXPECT_EQ(r.result.tokens_restored, 16u) << r.result.problem;
    EXPECT_NE(r.result.problem.find("own records served 16"), std::string::npos)
        << r.result.problem;
    const uint64_t n = s.tokens.size();
    testing::expect_rows(m, m.rank(0, 1).row_bytes(), r.kv, n, s.kv, n, 16,
                         /*untouched_past_the_hit=*/false);
    EXPECT_TRUE(r.state == p.states[0]) << "not B's state at 16";
  }
  EXPECT_GT(e->stats().remote_rejected, 0u);
}

// The cost of a lookup on a node that holds nothing, for a prompt node A saved whole: a window
// of 24 one-token records and a state, 64 chunks. The cluster is asked about the full-attention
// chain, then the state of each chunk end, then the window's last record of the one end whose
// state exists, then the rest of its window: ~2 keys a chunk and one window. Asking about every
// window record of every end would cost one key a token (8 a chunk) for the window alone.
TEST(EngineRemoteHybrid, ALookupAsksTheClusterAboutTheLastRecordsFirst) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const std::string seeds = (*cluster)->seeds();
  std::mt19937_64 rng(testing::test_seed());
  Hybrid m = one_window_model(8, 24, 1);
  m.state_layers = 1;
  m.state_bytes = 64;
  const uint64_t chunks = 64, n = chunks * m.chunk;
  const HybridSession s = session_of(m, n, rng);
  TempDir dir_a, dir_b;
  save_node(dir_a, m, s, 1, seeds);
  std::unique_ptr<Engine> e = open_node(dir_b, m, 0, 1, seeds);
  ASSERT_TRUE(e);
  auto held = e->lookup(s.tokens);
  ASSERT_OK(held);
  EXPECT_EQ(*held, n);
  const uint64_t probes = e->stats().remote_probes;
  // The chain and the states (a key a chunk each), and one window's records.
  EXPECT_GE(probes, 2 * chunks);
  EXPECT_LE(probes, 2 * chunks + m.window + 2) << "asked about more than the last records first";
  testing::restore_rank(*e, m, s, 0, 1, n, rng);
}

}  // namespace
}  // namespace kvtier
